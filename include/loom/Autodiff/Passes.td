//===- Passes.td - autodiff and the optimizer --------------*- tablegen -*-===//
//
// The forward becomes a training step: reverse-mode gradients, then the
// optimizer update. The flags keep the `train-` prefix: they act on the
// train-tagged loss function.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_AUTODIFF_PASSES_TD
#define LOOM_AUTODIFF_PASSES_TD

include "mlir/Pass/PassBase.td"

def TrainAutodiffPass : Pass<"train-autodiff", "::mlir::ModuleOp"> {
  let summary = "Turns a loss function into a training step returning gradients";
  let description = [{
    Reverse-mode differentiation of every function with a `train.loss`
    result. The function keeps its arguments and returns the loss followed by
    one gradient per `train.param` argument, in argument order, each tagged
    `train.grad = "<param name>"`:

    ```mlir
    func.func @f(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<4xf32> {train.input})
        -> (tensor<f32> {train.loss})
    ```
    becomes
    ```mlir
    func.func @f(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<4xf32> {train.input})
        -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"})
    ```

    Named linalg ops are differentiated through their generic form; the body
    of a `linalg.generic` is differentiated scalar by scalar. The backward
    reads only the forward values the derivative needs (see docs/Autodiff.md).
  }];
  let options = [
    Option<"cleanup", "cleanup", "bool", /*default=*/"true",
           "canonicalise and CSE afterwards, which also drops the forward "
           "values the backward does not read">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

def TrainOptimizerPass : Pass<"train-optimizer", "::mlir::ModuleOp"> {
  let summary = "Appends the optimizer update to a training step";
  let description = [{
    On every function produced by `train-autodiff`, inserts the optimizer
    state after the parameter arguments and replaces the gradient results by
    the updated parameters and state: the step takes
    `(params..., state..., inputs...)` and returns
    `(loss, other results..., new params..., new state...)`. AdamW keeps two
    moments per parameter (`train.state = "<param>.m"`, `"<param>.v"`, of the
    parameter's type) and a step counter (`train.state = "step"`,
    `tensor<f32>`, 0 before the first step); SGD keeps none. The updates are
    PyTorch's `AdamW` and `SGD` (with L2 `weight_decay`):

    ```
      AdamW, for each parameter p with gradient g:
        t' = t + 1
        m' = b1 m + (1 - b1) g              v' = b2 v + (1 - b2) g^2
        p' = p - lr (m' / (1 - b1^t') / (sqrt(v' / (1 - b2^t')) + eps) + wd p)
      SGD:
        p' = p - lr (g + wd p)
    ```

    The bias corrections `1 - b^t'` are computed in f64 from the betas as
    given and rounded once to f32, as PyTorch's Python-float corrections
    are; the rest is in the parameter's type.
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"adamw\"",
           "the optimizer: adamw or sgd">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "AdamW first-moment decay">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999",
           "AdamW second-moment decay">,
    Option<"eps", "eps", "double", /*default=*/"1e-8",
           "AdamW denominator epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "decoupled weight decay (AdamW) or L2 decay (SGD)">,
    Option<"lrInput", "lr-input", "bool", /*default=*/"false",
           "take the learning rate as a 0-d f32 argument tagged "
           "train.input = \"lr\" (the last one) instead of the constant "
           "`lr`, so a trainer can set or schedule it at run time">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

#endif // LOOM_AUTODIFF_PASSES_TD
