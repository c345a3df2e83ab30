//===- SchedulePipeline.cpp - loom-schedule-pipeline ----------------------===//
//
// The communication-scheduling passes in the order each one's input wants:
//
//   zero-selective-gather   decides which parameters stay gathered from the
//                           forward into the backward; it removes gathers,
//                           so it runs before anything counts or moves them;
//   coll-bucket             merges the collectives that remain, in ready
//                           order (its overlap check simulates the order it
//                           is given, which is still the partitioner's);
//   coll-prefetch           moves gathers into the original peak's headroom;
//   coll-overlap-schedule   retimes waits, prefetches again into the memory
//                           that frees, and checks the limit and makespan.
//
// The device, memory limit and prefetch distance are shared options.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Coll/CollPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace {

struct SchedulePipelineOptions
    : public PassPipelineOptions<SchedulePipelineOptions> {
  Option<std::string> device{*this, "device",
                             llvm::cl::desc("device description"),
                             llvm::cl::init("h100-nvlink")};
  Option<double> memoryLimitMb{
      *this, "memory-limit-mb",
      llvm::cl::desc("absolute limit in MiB (0: the original peak plus "
                     "the headroom)"),
      llvm::cl::init(0)};
  Option<double> memoryHeadroomMb{
      *this, "memory-headroom-mb",
      llvm::cl::desc("MiB above the original peak"), llvm::cl::init(0)};
  Option<double> gatherBudgetMb{
      *this, "gather-budget-mb",
      llvm::cl::desc("memory for parameters kept gathered from the forward "
                     "into the backward, MiB (0: none)"),
      llvm::cl::init(0)};
  Option<double> bucketMb{*this, "bucket-mb",
                          llvm::cl::desc("largest bucket, MiB (0: no "
                                         "bucketing)"),
                          llvm::cl::init(25)};
  Option<double> firstBucketMb{*this, "first-bucket-mb",
                               llvm::cl::desc("largest first bucket, MiB"),
                               llvm::cl::init(1)};
  Option<unsigned> distance{
      *this, "distance",
      llvm::cl::desc("furthest an all-gather start moves, in ops"),
      llvm::cl::init(200)};
};

void buildSchedulePipeline(OpPassManager &pm,
                           const SchedulePipelineOptions &options) {
  if (options.gatherBudgetMb > 0)
    pm.addPass(loom::coll::createZeroSelectiveGatherPass(
        {options.gatherBudgetMb, options.device}));
  if (options.bucketMb > 0)
    pm.addNestedPass<func::FuncOp>(loom::coll::createCollBucketPass(
        {options.bucketMb, options.firstBucketMb, options.device}));
  pm.addNestedPass<func::FuncOp>(loom::coll::createCollPrefetchPass(
      {options.distance, options.memoryHeadroomMb, /*overtake=*/true,
       options.device}));
  pm.addNestedPass<func::FuncOp>(loom::coll::createCollOverlapSchedulePass(
      {options.device, options.memoryLimitMb, options.memoryHeadroomMb,
       options.distance}));
}

} // namespace

void loom::coll::registerSchedulePipeline() {
  PassPipelineRegistration<SchedulePipelineOptions>(
      "loom-schedule-pipeline",
      "Selective gather, bucketing, prefetch and the memory-bounded overlap "
      "schedule, with shared options",
      buildSchedulePipeline);
}
