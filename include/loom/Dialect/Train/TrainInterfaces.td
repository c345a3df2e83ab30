//===- TrainInterfaces.td - train op interfaces ------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_TRAIN_TRAININTERFACES_TD
#define LOOM_DIALECT_TRAIN_TRAININTERFACES_TD

include "mlir/IR/OpBase.td"

def Train_DecomposableOpInterface : OpInterface<"DecomposableOpInterface"> {
  let cppNamespace = "::loom::train";
  let description = [{
    An op with a reference decomposition into linalg, tensor, arith and math
    on tensors. `train-decompose` uses it for targets without a kernel, and
    the evaluation harness uses it to check kernels against.
  }];
  let methods = [
    InterfaceMethod<[{Builds the decomposition at the builder's insertion
      point and returns the values that replace the op's results.}],
      "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "decompose",
      (ins "::mlir::OpBuilder &":$builder)>,
  ];
}

#endif // LOOM_DIALECT_TRAIN_TRAININTERFACES_TD
