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

#endif // LOOM_DIALECT_TRAIN_TRAINPASSES_TD
