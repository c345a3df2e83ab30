//===- LoomSchedulePipeline.cpp - loom-schedule-pipeline ------------------===//
//
// The communication-scheduling passes in the order each one's input wants:
//
//   train-remat             (with remat-budget-mb) recomputes activations so
//                           that the step's peak in the synchronous order is
//                           within the budget, which is then the
//                           scheduler's limit too unless memory-limit-mb
//                           is given: one limit for both;
//   zero-selective-gather   decides which parameters stay gathered from the
//                           forward into the backward; it removes gathers,
//                           so it runs before anything counts or moves them;
//   coll-bucket             merges the collectives that remain, in ready
//                           order (its overlap check simulates the order it
//                           is given, which is still the partitioner's);
//   coll-overlap-schedule   retimes every collective from the synchronous
//                           order within the memory limit and keeps the
//                           fastest order the simulation finds.
//
// The memory limit and prefetch distance are shared options; every pass
// estimates time on the module's target (loom-set-target).
//
//===----------------------------------------------------------------------===//

#include "PipelineParts.h"
#include "loom/Dialect/Coll/CollPasses.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Sharding/Passes.h"

using namespace mlir;

void loom::buildSchedulePipeline(OpPassManager &pm,
                                 const SchedulePipelineOptions &options) {
  if (options.rematBudgetMb > 0 || options.rematActivations < 1) {
    pipelines::addTrainRemat(pm, options.rematBudgetMb,
                             options.rematActivations, options.rematSolver,
                             options.leanestBelowFloor);
  }
  if (options.gatherBudgetMb > 0) {
    sharding::ZeroSelectiveGatherPassOptions gather;
    gather.budgetMb = options.gatherBudgetMb;
    pm.addPass(sharding::createZeroSelectiveGatherPass(gather));
  }
  if (options.bucketMb > 0) {
    coll::CollBucketPassOptions bucket;
    bucket.bucketMb = options.bucketMb;
    bucket.firstBucketMb = options.firstBucketMb;
    pm.addNestedPass<func::FuncOp>(coll::createCollBucketPass(bucket));
  }
  coll::CollOverlapSchedulePassOptions schedule;
  schedule.memoryLimitMb =
      options.memoryLimitMb > 0 ? options.memoryLimitMb : options.rematBudgetMb;
  schedule.memoryHeadroom = options.memoryHeadroom;
  schedule.synchronousBelowFloor = options.leanestBelowFloor;
  schedule.distance = options.distance;
  pm.addNestedPass<func::FuncOp>(coll::createCollOverlapSchedulePass(schedule));
}
