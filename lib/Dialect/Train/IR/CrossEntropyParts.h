//===- CrossEntropyParts.h - cross-entropy pieces in linalg -----*- C++ -*-===//
//
// The linalg pieces train.cross_entropy, its gradient and the fused
// train.linear_cross_entropy decompose into (CrossEntropyDecomposition.cpp,
// LinearCrossEntropyDecomposition.cpp). Internal to the Train dialect.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_DIALECT_TRAIN_IR_CROSSENTROPYPARTS_H
#define LOOM_LIB_DIALECT_TRAIN_IR_CROSSENTROPYPARTS_H

#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Utils/LinalgBuilder.h"

namespace loom::train::detail {

/// The pieces both directions need, for `[tokens, vocab]` logits (or one
/// chunk of them) and their `[tokens]` labels.
struct CrossEntropyParts {
  mlir::Value logits, labels;
  int64_t tokens, vocab;
  mlir::Type type;
  int64_t ignoreIndex;
  /// For a block of vocabulary columns: the first column's index and the
  /// whole vocabulary's size (label smoothing spreads over all of it).
  mlir::Value columnOffset = {};
  int64_t totalVocab = 0;

  int64_t fullVocab() const { return totalVocab ? totalVocab : vocab; }

  /// `labels[i] != ignore_index` for a label scalar.
  mlir::Value isValid(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::Value label) const;
  /// Row-wise log-sum-exp, stabilised by the row maximum: `[tokens]`.
  mlir::Value logSumExp(LinalgBuilder &lb) const;
  /// The number of labels not ignored, as a 0-d float tensor.
  mlir::Value validCount(LinalgBuilder &lb) const;
  /// Each token's loss, 0 for ignored tokens: `[tokens]`.
  mlir::Value perTokenLoss(LinalgBuilder &lb, mlir::Value lse, double smoothing,
                           double zLoss) const;
  /// The same from its pieces: the log-sum-exp, the target logit and (with
  /// label smoothing) the sum of each row's logits, all `[tokens]`.
  mlir::Value perTokenLossFrom(LinalgBuilder &lb, mlir::Value lse,
                               mlir::Value target, mlir::Value rowSum,
                               double smoothing, double zLoss) const;
  /// The per-token losses reduced as `reduction` says.
  mlir::Value reduce(LinalgBuilder &lb, mlir::Value perToken,
                     LossReduction reduction) const;
  /// Each token's share of the incoming loss gradient: the gradient (per
  /// token for `none`), over the valid count for `mean`, 0 when ignored.
  mlir::Value tokenWeights(LinalgBuilder &lb, mlir::Value lossGrad,
                           LossReduction reduction) const;
  /// The gradient of the logits from the log-sum-exp and token weights:
  /// `w[i] * (p (1 + 2 z lse) - (1 - ls) [j == label] - ls / vocab)`,
  /// written into `init` (a fresh tensor when null; the logits themselves
  /// to compute in place).
  mlir::Value logitsGrad(LinalgBuilder &lb, mlir::Value lse,
                         mlir::Value weights, double smoothing, double zLoss,
                         mlir::Value init = {}) const;
};

} // namespace loom::train::detail

#endif // LOOM_LIB_DIALECT_TRAIN_IR_CROSSENTROPYPARTS_H
