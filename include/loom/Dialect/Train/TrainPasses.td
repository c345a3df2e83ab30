//===- TrainPasses.td - train passes -----------------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_TRAIN_TRAINPASSES_TD
#define LOOM_DIALECT_TRAIN_TRAINPASSES_TD

include "mlir/Pass/PassBase.td"

def TrainDecomposePass : Pass<"train-decompose"> {
  let summary = "Replaces train ops by their linalg decompositions";
  let description = [{
    Rewrites every op implementing `DecomposableOpInterface` into linalg,
    tensor, arith and math ops on tensors, for targets without a kernel and
    as the reference that kernels are checked against.

    ```mlir
    %y = train.rms_norm %x, %w eps = 1.0e-05 : tensor<4x64xf32>, tensor<64xf32>
    ```
    becomes a `linalg.generic` reduction of `x^2` over the last dimension
    followed by an elementwise `linalg.generic` computing
    `x * rsqrt(sum / 64 + eps) * w`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

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

#endif // LOOM_DIALECT_TRAIN_TRAINPASSES_TD
