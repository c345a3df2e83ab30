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

constexpr SimulationOptions kTimesOnly{/*events=*/false, /*memory=*/false};
constexpr SimulationOptions kNoEvents{/*events=*/false, /*memory=*/true};

/// The waits whose collective frees memory when done (reduce-scatters and
/// all-reduces: their input, typically a full gradient), with their starts.
/// Gather and broadcast waits free nothing, so retiming them does not pay.
SmallVector<std::pair<WaitOp, CollectiveOpInterface>>
getFreeingWaits(Block &block) {
  SmallVector<std::pair<WaitOp, CollectiveOpInterface>> waits;
  for (WaitOp wait : block.getOps<WaitOp>()) {
    CollectiveOpInterface start = wait.getStart();
    if (start && start.getKind() != CollectiveKind::AllGather &&
        start.getKind() != CollectiveKind::Broadcast)
      waits.push_back({wait, start});
  }
  return waits;
}

/// Moves each reduce-scatter and all-reduce wait up to the first op the
/// compute stream reaches after the collective is done (never past the
/// wait's first use, never before its start). Waits are not candidate
/// targets: one moved already sits where its old time no longer holds. A
/// moved wait that still stalls in the new order goes back where it was;
/// this repeats until none does.
void waitWhenDone(Block &block, const CostModel &model) {
  SimulationResult sim = simulate(block, model, kTimesOnly);
  // Each moved wait and the op it used to precede.
  SmallVector<std::pair<WaitOp, Operation *>> moved;
  for (auto [wait, start] : getFreeingWaits(block)) {
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
    SimulationResult now = simulate(block, model, kTimesOnly);
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

/// Moves each reduce-scatter or all-reduce wait that stalls the compute
/// stream down to the first op reached once its collective is done, but not
/// past the wait's first use. A later prefetch can delay a collective on its
/// in-order stream; this gives its wait the time back. Repeats while a wait
/// moves, as each move shifts later times earlier.
void sinkStalledWaits(Block &block, const CostModel &model) {
  for (int round = 0; round < 8; ++round) {
    SimulationResult sim = simulate(block, model, kTimesOnly);
    bool changed = false;
    for (auto [wait, start] : getFreeingWaits(block)) {
      double done = sim.times.lookup(start).second;
      // The ops after the wait were reached `stall` later than they would
      // be without it.
      double stall = done - sim.reached.lookup(wait);
      if (stall <= 0)
        continue;
      llvm::SmallPtrSet<Operation *, 4> users;
      for (Operation *user : wait->getUsers())
        if (Operation *inBlock = block.findAncestorOpInBlock(*user))
          users.insert(inBlock);
      Operation *target = nullptr;
      for (Operation *op = wait->getNextNode(); op; op = op->getNextNode()) {
        target = op;
        if (users.contains(op) || op->hasTrait<OpTrait::IsTerminator>() ||
            (!isa<WaitOp>(op) && sim.reached.lookup(op) - stall >= done))
          break;
      }
      if (target && target != wait->getNextNode()) {
        wait->moveBefore(target);
        changed = true;
      }
    }
    if (!changed)
      return;
  }
}

/// Faster by more than rounding, or as fast with a smaller peak.
bool isBetter(const SimulationResult &a, const SimulationResult &b) {
  if (a.makespan < b.makespan * (1 - 1e-9))
    return true;
  return a.makespan <= b.makespan * (1 + 1e-9) && a.peakBytes < b.peakBytes;
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
      SmallVector<Operation *> original = getBlockOrder(block);
      SimulationResult before = simulate(block, model, kNoEvents);
      int64_t originalPeak = before.peakBytes;
      int64_t limit =
          memoryLimitMb > 0
              ? int64_t(memoryLimitMb * 1024.0 * 1024.0)
              : originalPeak + int64_t(memoryHeadroomMb * 1024.0 * 1024.0);
      // A limit below the original peak cannot be reached by retiming
      // collectives alone; the result then stays within the original peak.
      limit = std::max(limit, int64_t(0));
      // Reduce-scatters and all-reduces start as soon as their inputs
      // exist (and their stream allows). Gathers then move into the
      // original order's headroom; then each reduce-scatter wait goes to
      // where its collective is done in that order, which frees gradients.
      // The memory that frees buys more prefetch, but gathers that overtake
      // more reduce-scatters can leave the stream a backlog at the end of
      // the step, so both orders are simulated and the faster kept (on a
      // tie, the smaller peak).
      hoistStarts(block, CollectiveKind::ReduceScatter, ~0u, limit,
                  /*overtake=*/false);
      hoistStarts(block, CollectiveKind::AllReduce, ~0u, limit,
                  /*overtake=*/false);
      prefetchAllGathersWhereFaster(block, distance, limit, model);
      waitWhenDone(block, model);
      SmallVector<Operation *> retimed = getBlockOrder(block);
      SimulationResult retimedSim = simulate(block, model, kNoEvents);
      prefetchAllGathersWhereFaster(block, distance, limit, model);
      sinkStalledWaits(block, model);
      SimulationResult after = simulate(block, model, kNoEvents);
      int64_t hardLimit = std::max(limit, originalPeak);
      if (after.peakBytes > hardLimit || !isBetter(after, retimedSim)) {
        setBlockOrder(block, retimed);
        after = retimedSim;
      }
      // The guarantees are checked, not assumed: if the simulation disagrees,
      // the original order stands.
      if (after.makespan > before.makespan * (1 + 1e-12) ||
          after.peakBytes > hardLimit)
        setBlockOrder(block, original);
    }
  }
};

} // namespace
