//===- ReductionMatch.h - reductions that can be regrouped ------*- C++ -*-===//
//
// Shared by the passes that change the order of a reduction:
// loom-linalg-to-gpu (a block per output) and train-split-reduction
// (partials, then their combination).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_TRAIN_REDUCTIONMATCH_H
#define LOOM_DIALECT_TRAIN_REDUCTIONMATCH_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace loom::train {

/// The combiner of `op` if its one result folds each element into the
/// output with one add, mul, max or min (a combiner with a neutral element,
/// so that partial results can start from it and be combined again), the
/// output read only by that combiner; else null. On tensors or buffers.
mlir::Operation *regroupableCombiner(mlir::linalg::GenericOp op);

} // namespace loom::train

#endif // LOOM_DIALECT_TRAIN_REDUCTIONMATCH_H
