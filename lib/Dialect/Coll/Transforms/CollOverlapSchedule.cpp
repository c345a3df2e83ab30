//===- CollOverlapSchedule.cpp - retime collectives under a memory limit --===//

#include "Prefetch.h"
#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Analysis/Simulator.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Coll/CollPasses.h"

namespace loom::coll {
#define GEN_PASS_DEF_COLLOVERLAPSCHEDULEPASS
#include "loom/Dialect/Coll/CollPasses.h.inc"
} // namespace loom::coll

using namespace mlir;
using namespace loom;
using namespace loom::coll;

namespace {

/// Moves each reduce-scatter and all-reduce wait up to the first op the
/// compute stream reaches after the collective is done (never past the
/// wait's first use, never before its start). Waits are not candidate
/// targets: one moved already sits where its old time no longer holds. A
/// moved wait that still stalls in the new order goes back where it was;
/// this repeats until none does.
void waitWhenDone(Block &block, const CostModel &model) {
  SimulationResult sim = simulate(block, model);
  // Each moved wait and the op it used to precede.
  SmallVector<std::pair<WaitOp, Operation *>> moved;
  SmallVector<WaitOp> waits(block.getOps<WaitOp>());
  for (WaitOp wait : waits) {
    CollectiveOpInterface start = wait.getStart();
    if (!start || start.getKind() == CollectiveKind::AllGather ||
        start.getKind() == CollectiveKind::Broadcast)
      continue;
    double done = sim.times.lookup(start).second;
    for (Operation *op = start->getNextNode(); op && op != wait;
         op = op->getNextNode())
      if (!isa<WaitOp>(op) && sim.reached.lookup(op) >= done) {
        moved.push_back({wait, wait->getNextNode()});
        wait->moveBefore(op);
        break;
      }
  }
  while (!moved.empty()) {
    SimulationResult now = simulate(block, model);
    SmallVector<std::pair<WaitOp, Operation *>> kept;
    bool restored = false;
    for (auto [wait, next] : moved) {
      CollectiveOpInterface start = wait.getStart();
      if (now.times.lookup(start).second > now.reached.lookup(wait)) {
        wait->moveBefore(next);
        restored = true;
      } else {
        kept.push_back({wait, next});
      }
    }
    if (!restored)
      break;
    moved = std::move(kept);
  }
}

struct CollOverlapSchedulePass
    : public loom::coll::impl::CollOverlapSchedulePassBase<
          CollOverlapSchedulePass> {
  using CollOverlapSchedulePassBase::CollOverlapSchedulePassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (memoryLimitMb < 0 || memoryHeadroomMb < 0) {
      func.emitError("coll-overlap-schedule: expected non-negative "
                     "memory-limit-mb and memory-headroom-mb");
      return signalPassFailure();
    }
    std::optional<CostModel> loaded =
        loadCostModel(func, "coll-overlap-schedule", device);
    if (!loaded)
      return signalPassFailure();
    CostModel &model = *loaded;
    for (Block &block : func.getBody()) {
      SmallVector<Operation *> original;
      for (Operation &op : block)
        original.push_back(&op);
      SimulationResult before = simulate(block, model);
      int64_t originalPeak = before.peakBytes;
      int64_t limit =
          memoryLimitMb > 0
              ? int64_t(memoryLimitMb * 1024.0 * 1024.0)
              : originalPeak + int64_t(memoryHeadroomMb * 1024.0 * 1024.0);
      // A limit below the original peak cannot be reached by retiming
      // collectives alone; the result then stays within the original peak.
      limit = std::max(limit, int64_t(0));
      waitWhenDone(block, model);
      int64_t freedPeak = MemoryTimeline(block).getPeakBytes();
      prefetchAllGathers(block, distance, std::max(limit, freedPeak));
      // The guarantees are checked, not assumed: if the simulation disagrees,
      // the original order stands.
      SimulationResult after = simulate(block, model);
      if (after.makespan > before.makespan * (1 + 1e-12) ||
          after.peakBytes > std::max(limit, originalPeak)) {
        Operation *terminator = block.getTerminator();
        for (Operation *op : original)
          if (op != terminator)
            op->moveBefore(terminator);
      }
    }
  }
};

} // namespace
