//===- CollOverlapSchedule.cpp - overlap collectives under a hard limit ---===//

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Analysis/Simulator.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Coll/CollPasses.h"
#include "loom/Dialect/Coll/Retime.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "llvm/Support/FormatVariadic.h"

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

bool isReduction(CollectiveOpInterface start) {
  return start.getKind() == CollectiveKind::ReduceScatter ||
         start.getKind() == CollectiveKind::AllReduce;
}

std::string formatMiB(int64_t bytes) {
  return llvm::formatv("{0:F2} MiB", double(bytes) / (1024.0 * 1024.0));
}

/// Moves each reduce-scatter and all-reduce wait that stalls the compute
/// stream down towards the first op the stream reaches once its collective
/// is done, never past a use of its result, and only while every op it
/// passes, now holding the collective's input too, stays within `limit`.
/// Waits are not targets: one moved already sits where its old time no
/// longer holds. Each move shifts later times, so this repeats while a
/// wait moves (at most 8 rounds, each a simulation and a timeline).
void sinkWaitsWithinLimit(Block &block, const CostModel &model, int64_t limit) {
  for (int round = 0; round < 8; ++round) {
    SimulationResult sim = simulate(block, model, kTimesOnly);
    SmallVector<Operation *> order = getBlockOrder(block);
    MemoryTimeline timeline(block, order,
                            MemoryTimelineOptions::asPlanned(block));
    std::vector<int64_t> live(timeline.getLiveBytes().begin(),
                              timeline.getLiveBytes().end());
    bool changed = false;
    // Latest first: a move rotates only positions at and after the wait's.
    for (unsigned position = order.size(); position-- > 0;) {
      auto wait = dyn_cast<WaitOp>(order[position]);
      CollectiveOpInterface start = wait ? wait.getStart() : nullptr;
      if (!start || !isReduction(start))
        continue;
      double done = sim.times.lookup(start).second;
      // The ops after the wait are reached `stall` later than they would
      // be without it.
      double stall = done - sim.reached.lookup(wait);
      if (stall <= 0)
        continue;
      // Charged to every op passed, whether or not something else keeps the
      // input alive too; an unused result also lives until the wait.
      int64_t held = start.getInputBytes().value_or(0);
      if (wait->use_empty())
        held += start.getResultBytes().value_or(0);
      llvm::SmallPtrSet<Operation *, 4> users;
      for (Operation *user : wait->getUsers())
        if (Operation *inBlock = block.findAncestorOpInBlock(*user))
          users.insert(inBlock);
      unsigned target = position;
      int64_t spanMax = 0;
      for (unsigned i = position + 1; i < order.size(); ++i) {
        Operation *op = order[i];
        if (users.contains(op) || op->hasTrait<OpTrait::IsTerminator>() ||
            (!isa<WaitOp>(op) && sim.reached.lookup(op) - stall >= done))
          break;
        spanMax = std::max(spanMax, live[i]);
        if (spanMax + held > limit)
          break;
        target = i;
      }
      if (target == position)
        continue;
      for (unsigned i = position + 1; i <= target; ++i)
        live[i] += held;
      int64_t atWait = live[target];
      std::rotate(order.begin() + position, order.begin() + position + 1,
                  order.begin() + target + 1);
      std::rotate(live.begin() + position, live.begin() + position + 1,
                  live.begin() + target + 1);
      live[target] = atWait;
      changed = true;
    }
    if (!changed)
      return;
    setBlockOrder(block, order);
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
    if (memoryLimitMb < 0 || memoryHeadroom < 0) {
      func.emitError("coll-overlap-schedule: expected non-negative "
                     "memory-limit-mb and memory-headroom");
      return signalPassFailure();
    }
    std::optional<CostModel> loaded =
        getCostModel(func, "coll-overlap-schedule");
    if (!loaded)
      return signalPassFailure();
    const CostModel &model = *loaded;
    for (Block &block : func.getBody())
      if (failed(schedule(block, model)))
        return signalPassFailure();
  }

  LogicalResult schedule(Block &block, const CostModel &model) {
    struct Candidate {
      const char *name;
      SmallVector<Operation *> order;
      SimulationResult sim;
    };
    Candidate input{"the input order", getBlockOrder(block),
                    simulate(block, model, kNoEvents)};
    synchronize(block);
    Candidate base{"the synchronous order", getBlockOrder(block),
                   simulate(block, model, kNoEvents)};
    // For the tools: what the least-memory schedule needs.
    Operation *owner = block.getParentOp();
    if (owner->getNumRegions() == 1 && owner->getRegion(0).hasOneBlock())
      owner->setAttr(
          loom::train::TrainDialect::kSynchronousPeakBytesAttrName,
          Builder(owner->getContext()).getI64IntegerAttr(base.sim.peakBytes));
    int64_t limit =
        memoryLimitMb > 0
            ? int64_t(memoryLimitMb * 1024.0 * 1024.0)
            : int64_t(double(base.sim.peakBytes) * (1.0 + memoryHeadroom));
    if (limit < base.sim.peakBytes && synchronousBelowFloor) {
      emitRemark(block.getParentOp()->getLoc())
          << "coll-overlap-schedule: memory-limit-mb="
          << llvm::formatv("{0:F2}", double(memoryLimitMb))
          << " is below the synchronous order's peak, "
          << formatMiB(base.sim.peakBytes)
          << "; it keeps that order (synchronous-below-floor)";
      return success();
    }
    if (limit < base.sim.peakBytes) {
      setBlockOrder(block, input.order);
      return emitError(block.getParentOp()->getLoc())
             << "coll-overlap-schedule: memory-limit-mb="
             << llvm::formatv("{0:F2}", double(memoryLimitMb))
             << " is below the smallest peak retiming collectives reaches, "
             << formatMiB(base.sim.peakBytes)
             << " (the synchronous order: every collective waited right "
                "after its start)";
    }
    // Two ways into the memory above the synchronous peak, each simulated:
    // prefetching gathers first, or holding gradients in flight first
    // (both then take what the other left).
    SmallVector<Candidate, 2> retimed;
    for (bool gathersFirst : {true, false}) {
      setBlockOrder(block, base.order);
      if (!gathersFirst)
        sinkWaitsWithinLimit(block, model, limit);
      prefetchAllGathersWhereFaster(block, distance, limit, model);
      sinkWaitsWithinLimit(block, model, limit);
      retimed.push_back({gathersFirst ? "gathers prefetched first"
                                      : "reductions deferred first",
                         getBlockOrder(block),
                         simulate(block, model, kNoEvents)});
    }
    // The limit is checked on the full timeline, not on the moves' own
    // accounting; an order over it is dropped, and the user told.
    const Candidate *best = &base;
    auto consider = [&](const Candidate &candidate, bool retimedOrder) {
      if (candidate.sim.peakBytes > limit) {
        if (retimedOrder)
          emitRemark(block.getParentOp()->getLoc())
              << "coll-overlap-schedule: dropped the order with "
              << candidate.name << ": its peak "
              << formatMiB(candidate.sim.peakBytes) << " is over the limit "
              << formatMiB(limit);
        return;
      }
      if (isBetter(candidate.sim, best->sim))
        best = &candidate;
    };
    for (const Candidate &candidate : retimed)
      consider(candidate, /*retimedOrder=*/true);
    consider(input, /*retimedOrder=*/false);
    setBlockOrder(block, best->order);
    return success();
  }
};

} // namespace
