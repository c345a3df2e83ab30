//===- Accumulation.h - gradients summed over microbatches --------*- C++
//-*-===//

#ifndef LOOM_LIB_PIPELINEPARALLEL_ACCUMULATION_H
#define LOOM_LIB_PIPELINEPARALLEL_ACCUMULATION_H

#include "mlir/IR/Block.h"

namespace loom::pp {

/// Rebuilds each sum of gradients over microbatches (train-autodiff adds
/// them in reverse, the last microbatch first) as a chain in microbatch
/// order, in f32 for narrower floats, so that each microbatch's gradient is
/// added, and freed, in its own backward instead of all living until the
/// last one.
void accumulateInMicrobatchOrder(mlir::Block &body);

} // namespace loom::pp

#endif // LOOM_LIB_PIPELINEPARALLEL_ACCUMULATION_H
