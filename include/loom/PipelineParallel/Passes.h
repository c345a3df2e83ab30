//===- Passes.h - pipeline parallelism (pp-partition) ----------*- C++ -*-===//

#ifndef LOOM_PIPELINEPARALLEL_PASSES_H
#define LOOM_PIPELINEPARALLEL_PASSES_H

#include "mlir/Pass/Pass.h"

namespace loom::pp {

#define GEN_PASS_DECL
#include "loom/PipelineParallel/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/PipelineParallel/Passes.h.inc"

} // namespace loom::pp

#endif // LOOM_PIPELINEPARALLEL_PASSES_H
