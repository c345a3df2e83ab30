//===- Accumulation.h - gradients summed over microbatches --------*- C++
//-*-===//

#ifndef LOOM_LIB_PIPELINEPARALLEL_ACCUMULATION_H
#define LOOM_LIB_PIPELINEPARALLEL_ACCUMULATION_H

#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseSet.h"

namespace loom::pp {

/// Rebuilds each sum of gradients over microbatches (train-autodiff adds
/// them in reverse, the last microbatch first) as a chain in microbatch
/// order, in f32 for narrower floats, so that each microbatch's gradient is
/// added, and freed, in its own backward instead of all living until the
/// last one. Only sums outside `forward` whose terms come from two
/// microbatches or more are rebuilt.
void accumulateInMicrobatchOrder(
    mlir::Block &body, const llvm::DenseSet<mlir::Operation *> &forward);

} // namespace loom::pp

#endif // LOOM_LIB_PIPELINEPARALLEL_ACCUMULATION_H
