//===- ReductionMatch.h - reductions to regroup or take over ----*- C++ -*-===//
//
// Shared by the passes that change the order of a reduction:
// gpu-map-linalg (a block per output) and gpu-split-reduction
// (partials, then their combination); and by those that let a reduction
// write its output from scratch: convert-linalg-to-blas (beta = 0) and
// gpu-map-linalg (a column reduction's lanes start from a fill).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_UTILS_REDUCTIONMATCH_H
#define LOOM_CODEGEN_UTILS_REDUCTIONMATCH_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace loom::codegen {

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
/// of a GPU idle (an H100 has 132 multiprocessors): gpu-map-linalg gives
/// such reductions a block per output, and loomc has gpu-split-reduction
/// split the column sums among them first.
constexpr int64_t kFewBlocks = 128;

} // namespace loom::codegen

#endif // LOOM_CODEGEN_UTILS_REDUCTIONMATCH_H
