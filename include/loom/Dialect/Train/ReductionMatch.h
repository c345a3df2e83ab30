//===- ReductionMatch.h - reductions to regroup or take over ----*- C++ -*-===//
//-*-===//
//
// Shared by the passes that change the order of a reduction:
// loom-linalg-to-gpu (a block per output) and train-split-reduction
// (partials, then their combination); and by those that let a reduction
// write its output from scratch: convert-linalg-to-blas (beta = 0) and
// loom-linalg-to-gpu (a column reduction's lanes start from a fill).
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

/// The linalg.fill of `buffer` right before `op`, with only ops free of
/// memory effects between them; null if another op comes first (a fill of
/// another buffer included). On buffers.
mlir::linalg::FillOp fillBefore(mlir::Operation *op, mlir::Value buffer);

/// Below this many blocks of threads, a thread per output would leave most
/// of a GPU idle (an H100 has 132 multiprocessors): loom-linalg-to-gpu gives
/// such reductions a block per output, and loomc has train-split-reduction
/// split the column sums among them first.
constexpr int64_t kFewBlocks = 128;

} // namespace loom::train

#endif // LOOM_DIALECT_TRAIN_REDUCTIONMATCH_H
