//===- InitAllPasses.h - register Loom's passes -----------------*- C++ -*-===//

#ifndef LOOM_INITALLPASSES_H
#define LOOM_INITALLPASSES_H

#include "loom/Autodiff/Passes.h"
#include "loom/Codegen/CPU/Passes.h"
#include "loom/Codegen/Common/Passes.h"
#include "loom/Codegen/GPU/Passes.h"
#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Coll/CollPasses.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "loom/PipelineParallel/Passes.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Remat/Passes.h"
#include "loom/Sharding/Passes.h"
#include "loom/Target/Passes.h"
#include "loom/Trainer/Passes.h"

namespace loom {

/// Registers every pass and pipeline Loom defines with the global registry,
/// in the order the data flows through them.
inline void registerAllPasses() {
  target::registerTargetPasses();
  train::registerTrainPasses();
  autodiff::registerAutodiffPasses();
  pp::registerPipelineParallelPasses();
  sharding::registerShardingPasses();
  remat::registerRematPasses();
  coll::registerCollPasses();
  codegen::registerCodegenCommonPasses();
  codegen::registerCodegenCPUPasses();
  codegen::registerCodegenGPUPasses();
  registerConversionPasses();
  trainer::registerTrainerPasses();
  registerPipelines();
}

} // namespace loom

#endif // LOOM_INITALLPASSES_H
