//===- Decompositions.h - train ops decomposed, for conversions -*- C++ -*-===//
//
// What a conversion that calls runtime kernels (convert-train-to-kernels,
// lib/Conversion) shares with the train ops' target-free decompositions
// (DecomposableOpInterface): the fused loss's chunk loops with the row work
// left to a LossRowKernels, and the embedding gradient's flat tokens. The
// dialect itself names no runtime kernel.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_TRAIN_DECOMPOSITIONS_H
#define LOOM_DIALECT_TRAIN_DECOMPOSITIONS_H

#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Utils/LinalgBuilder.h"

namespace loom::train {

/// The sizes and settings of a train.linear_cross_entropy (or its
/// gradient) as its decomposition chunks it.
struct FusedLossShape {
  int64_t tokens, dim, vocab;
  /// Tokens a chunk, and vocabulary columns a block (vocab: one block).
  int64_t chunk, block;
  /// What the loss is computed in: f32 for narrower floats.
  mlir::Type type;
  int64_t ignore;
  double smoothing, zLoss, softcap;

  /// `op`'s shape (a train.linear_cross_entropy or its gradient); an error
  /// on `op` for dynamic or empty shapes.
  static mlir::FailureOr<FusedLossShape> get(mlir::Operation *op);
};

/// The row work of one chunk of the fused loss, done by runtime kernels
/// instead of the decomposition's linalg: a conversion that knows the
/// runtime implements it.
class LossRowKernels {
public:
  virtual ~LossRowKernels();
  /// A chunk's labels as the kernels take them (once a chunk).
  virtual mlir::Value labels(mlir::OpBuilder &b, mlir::Location l,
                             const FusedLossShape &f,
                             mlir::Value labels) const = 0;
  /// The forward on one chunk's logits (not soft-capped: the kernel caps
  /// them) and kernel labels: the chunk's `[chunk]` log-sum-exp and loss.
  virtual std::pair<mlir::Value, mlir::Value>
  forward(mlir::OpBuilder &b, mlir::Location l, const FusedLossShape &f,
          mlir::Value logits, mlir::Value labels) const = 0;
  /// The logits' gradient on one `[chunk, width]` tile (not soft-capped) at
  /// vocabulary column `offset` (null: 0), in `gemmType`.
  virtual mlir::Value backward(mlir::OpBuilder &b, mlir::Location l,
                               const FusedLossShape &f, mlir::Value logits,
                               mlir::Value labels, mlir::Value lse,
                               mlir::Value weights, mlir::Value offset,
                               int64_t width, mlir::Type gemmType) const = 0;
};

/// train.linear_cross_entropy or its gradient as its chunk loops, the rows'
/// work done by `kernels` (null: in linalg, as DecomposableOpInterface
/// does). The forward over vocabulary blocks always runs in linalg.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
decomposeFusedLoss(mlir::Operation *op, mlir::OpBuilder &builder,
                   const LossRowKernels *kernels);

/// A train.embedding_grad's ids as `[tokens]` and its rows' gradient as
/// `[tokens, width]`.
struct FlatTokens {
  mlir::Value ids, grad;
  int64_t tokens;
};
FlatTokens flattenTokens(EmbeddingGradOp op, LinalgBuilder &lb);

} // namespace loom::train

#endif // LOOM_DIALECT_TRAIN_DECOMPOSITIONS_H
