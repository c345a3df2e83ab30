//===- LoomShardingPipeline.cpp - loom-sharding-pipeline ------------------===//
//
// The training step sharded ZeRO-style over the world (nothing with stage
// 0) and its communication scheduled under the memory limit (or put in a
// baseline order, for comparison; the ops numbered for profiles before
// either), then the peak of the scheduled step
// recorded for the trainer's manifest. First the choices the step's memory
// depends on: attention as fused kernels (train-fuse-attention), and what
// every other train op's lowering allocates (train-footprint), so that
// train-remat and the scheduler see the memory the plan will allocate.
//
//===----------------------------------------------------------------------===//

#include "PipelineParts.h"
#include "loom/Dialect/Coll/CollPasses.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Sharding/Passes.h"
#include "loom/Trainer/Passes.h"

using namespace mlir;

void loom::buildShardingPipeline(OpPassManager &pm,
                                 const ShardingOptions &options) {
  // The kernels attention runs as, then what each train op's lowering
  // allocates: train-remat and the scheduler bound the plan's memory.
  if (options.fuseAttention) {
    train::TrainFuseAttentionPassOptions attention;
    attention.cuda = options.target == Target::Cuda;
    pm.addNestedPass<func::FuncOp>(
        train::createTrainFuseAttentionPass(attention));
  }
  train::TrainFootprintPassOptions footprint;
  footprint.lowering = options.footprintLowering;
  if (footprint.lowering.empty()) {
    // The memory-plan phase's default lowering for the target.
    MemoryPlanOptions plan;
    plan.target = options.target.getValue();
    footprint.lowering = getFootprintLowering(plan);
  }
  pm.addPass(train::createTrainFootprintPass(footprint));
  if (options.zeroStage != ZeroStage::None) {
    sharding::ZeroPartitionPassOptions partition;
    partition.stage = unsigned(options.zeroStage.getValue());
    partition.worldSize = options.worldSize;
    pm.addPass(sharding::createZeroPartitionPass(partition));
  }
  // Numbered before any reordering: a profile's ids hold for every order.
  pm.addPass(trainer::createTrainerStampOpIdsPass());
  if (options.zeroStage != ZeroStage::None) {
    if (options.schedule == Schedule::Loom) {
      SchedulePipelineOptions schedule;
      schedule.memoryLimitMb = options.memoryLimitMb;
      schedule.rematBudgetMb = options.rematBudgetMb;
      schedule.rematSolver = options.rematSolver;
      schedule.rematActivations = options.rematActivations;
      schedule.leanestBelowFloor = options.leanestBelowFloor;
      buildSchedulePipeline(pm, schedule);
    } else {
      coll::CollReorderBaselinePassOptions baseline;
      baseline.policy = options.schedule == Schedule::Synchronous
                            ? "synchronous"
                        : options.schedule == Schedule::Fsdp ? "fsdp"
                                                             : "original";
      pm.addNestedPass<func::FuncOp>(
          coll::createCollReorderBaselinePass(baseline));
    }
  } else if (options.rematBudgetMb > 0 || options.rematActivations < 1) {
    // Unsharded: no collectives to schedule, activations to recompute.
    pipelines::addTrainRemat(pm, options.rematBudgetMb,
                             options.rematActivations, options.rematSolver,
                             options.leanestBelowFloor);
  }
  pm.addPass(trainer::createTrainerRecordScheduledPeakPass());
}
