//===- TrainOps.h - train operations ----------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_TRAIN_TRAINOPS_H
#define LOOM_DIALECT_TRAIN_TRAINOPS_H

#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

#include "loom/Dialect/Train/TrainEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Train/TrainAttributes.h.inc"

#include "loom/Dialect/Train/TrainInterfaces.h.inc"

#define GET_OP_CLASSES
#include "loom/Dialect/Train/TrainOps.h.inc"

namespace loom::train {

/// `op` decomposed as train-decompose{loss-kernels} does: for
/// train.linear_cross_entropy and its gradient computed in f32, each chunk's
/// log-sum-exp and loss, and its logits' gradient, become runtime kernels
/// (train.call_kernel of loomrt_cross_entropy_*); anything else decomposes
/// as DecomposableOpInterface says.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
decomposeWithLossKernels(mlir::Operation *op, mlir::OpBuilder &builder);

/// Why decomposeWithLossKernels would not call the loss kernels for `op` (a
/// train.linear_cross_entropy or its gradient): a loss not computed in f32,
/// a forward split in vocabulary blocks, or with `cuda` a chunk outside the
/// CUDA kernels' domain (loom/Runtime/KernelDomains.h). "" when it would.
std::string getLossKernelsRefusal(mlir::Operation *op, bool cuda);

/// `op` as one train.call_kernel of the runtime's scatter-add
/// (loomrt_embedding_grad_f32 or _bf16), as train-decompose{embedding-kernel}
/// does; std::nullopt where the kernel does not apply
/// (getEmbeddingKernelRefusal says why).
std::optional<llvm::SmallVector<mlir::Value>>
decomposeWithEmbeddingKernel(EmbeddingGradOp op, mlir::OpBuilder &builder);

/// Why the embedding kernel does not take `op` (ids other than i32, a table
/// other than f32 or bf16, dynamic shapes, or with `cuda` sizes outside the
/// CUDA kernel's domain), or "".
std::string getEmbeddingKernelRefusal(EmbeddingGradOp op, bool cuda);

} // namespace loom::train

#endif // LOOM_DIALECT_TRAIN_TRAINOPS_H
