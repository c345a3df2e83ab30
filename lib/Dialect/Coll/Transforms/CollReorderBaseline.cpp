//===- CollReorderBaseline.cpp - the orders users run, to compare with ----===//
//
// Each policy reorders only collective starts and waits; compute keeps its
// order. See CollPasses.td for what each one is.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Coll/CollPasses.h"
#include "loom/Dialect/Coll/Retime.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSwitch.h"

namespace loom::coll {
#define GEN_PASS_DEF_COLLREORDERBASELINEPASS
#include "loom/Dialect/Coll/CollPasses.h.inc"
} // namespace loom::coll

using namespace mlir;
using namespace loom::coll;

namespace {

enum class Policy { Original, Synchronous, Fsdp, SinkWaits, EagerPrefetch };

/// Moves `start` up to just after the last definition of its operands.
void hoistStart(Operation *start, Operation *&previousHoisted) {
  Block *block = start->getBlock();
  Operation *after = getLastOperandDef(start);
  // Keep the original order among hoisted starts (one communication stream).
  if (previousHoisted && (!after || after->isBeforeInBlock(previousHoisted)))
    after = previousHoisted;
  if (after)
    start->moveAfter(after);
  else
    start->moveBefore(&block->front());
  previousHoisted = start;
}

/// FSDP's wrapping unit of a gathered parameter: its train::getParamGroup
/// (one transformer block), "" (the root unit) for a name without a
/// numbered component. A gather of anything but a named parameter is a
/// unit of its own (null).
std::optional<std::string> getUnit(AllGatherStartOp start) {
  auto arg = dyn_cast<BlockArgument>(start.getInput());
  auto func =
      arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
  if (!func)
    return std::nullopt;
  auto name = func.getArgAttrOfType<StringAttr>(
      arg.getArgNumber(), loom::train::TrainDialect::kParamAttrName);
  if (!name)
    return std::nullopt;
  return loom::train::getParamGroup(name.getValue());
}

/// One use of a unit: a run of consecutive gathers of its parameters (the
/// forward uses each block once, the backward again in reverse).
struct Occurrence {
  SmallVector<AllGatherStartOp> starts;
  /// The first compute op after its first gather: where its compute starts.
  Operation *marker = nullptr;
};

/// PyTorch FSDP's policy (FSDP2's defaults, each transformer block a unit):
/// a unit's gathers start when the previous unit's compute starts and are
/// all waited before its own compute, so at most two gathered units are
/// alive; a reduce-scatter starts when its gradient exists and is waited
/// when the next unit's backward ends.
void fsdpOrder(Block &block) {
  // From whatever order came in: gathers at their uses, reductions at their
  // inputs.
  synchronize(block);
  SmallVector<Occurrence> occurrences;
  std::optional<std::optional<std::string>> current;
  for (auto start : block.getOps<AllGatherStartOp>()) {
    std::optional<std::string> unit = getUnit(start);
    if (!current || !unit || *current != unit)
      occurrences.emplace_back();
    current = unit;
    occurrences.back().starts.push_back(start);
  }
  if (occurrences.empty())
    return;
  auto isCollective = [](Operation *op) {
    return isa<CollectiveOpInterface, WaitOp, ReleaseOp, CommWorldOp,
               CommGroupOp>(op);
  };
  for (Occurrence &occurrence : occurrences) {
    Operation *op = occurrence.starts.front();
    while (isCollective(op))
      op = op->getNextNode();
    occurrence.marker = op;
  }
  // Where each reduce-scatter or all-reduce starts, by occurrence (in the
  // input order): its wait goes to the marker two occurrences on.
  SmallVector<std::pair<WaitOp, Operation *>> reductionWaits;
  {
    unsigned index = 0;
    Operation *nextAnchor = occurrences.size() > 1
                                ? occurrences[1].starts.front().getOperation()
                                : nullptr;
    Operation *previousHoisted = nullptr;
    for (Operation &op : llvm::make_early_inc_range(block)) {
      while (nextAnchor && &op == nextAnchor) {
        ++index;
        nextAnchor = index + 1 < occurrences.size()
                         ? occurrences[index + 1].starts.front().getOperation()
                         : nullptr;
      }
      auto start = dyn_cast<CollectiveOpInterface>(&op);
      if (!start || (start.getKind() != CollectiveKind::ReduceScatter &&
                     start.getKind() != CollectiveKind::AllReduce))
        continue;
      if (auto wait = dyn_cast_or_null<WaitOp>(start.getWait()))
        reductionWaits.push_back({wait, index + 2 < occurrences.size()
                                            ? occurrences[index + 2].marker
                                            : nullptr});
      hoistStart(&op, previousHoisted);
    }
  }
  // Gathers: occurrence o+1's start at occurrence o's marker, after o's
  // waits.
  for (auto [index, occurrence] : llvm::enumerate(occurrences)) {
    Operation *marker = occurrence.marker;
    for (AllGatherStartOp start : occurrence.starts) {
      if (index == 0 && marker->isBeforeInBlock(start))
        start->moveBefore(marker);
      if (auto wait = dyn_cast_or_null<WaitOp>(
              cast<CollectiveOpInterface>(start.getOperation()).getWait()))
        if (start->isBeforeInBlock(marker) && marker->isBeforeInBlock(wait))
          wait->moveBefore(marker);
    }
    if (index + 1 == occurrences.size())
      continue;
    for (AllGatherStartOp next : occurrences[index + 1].starts) {
      Operation *def = getLastOperandDef(next);
      if (marker->isBeforeInBlock(next) &&
          (!def || def->isBeforeInBlock(marker)))
        next->moveBefore(marker);
    }
  }
  // Reduction waits move down to their marker, but never past a use (the
  // last units' are waited at the end of the backward, before the update).
  for (auto [wait, marker] : reductionWaits) {
    sinkWait(wait);
    Operation *start = wait.getStart();
    if (marker && start->isBeforeInBlock(marker) &&
        marker->isBeforeInBlock(wait))
      wait->moveBefore(marker);
  }
}

struct CollReorderBaselinePass
    : public loom::coll::impl::CollReorderBaselinePassBase<
          CollReorderBaselinePass> {
  using CollReorderBaselinePassBase::CollReorderBaselinePassBase;

  void runOnOperation() override {
    std::optional<Policy> parsed =
        llvm::StringSwitch<std::optional<Policy>>(policy)
            .Case("original", Policy::Original)
            .Case("synchronous", Policy::Synchronous)
            .Case("fsdp", Policy::Fsdp)
            .Case("sink-waits", Policy::SinkWaits)
            .Case("eager-prefetch", Policy::EagerPrefetch)
            .Default(std::nullopt);
    if (!parsed) {
      getOperation().emitError()
          << "coll-reorder-baseline: expected policy original, synchronous, "
             "fsdp, sink-waits or eager-prefetch, got '"
          << policy << "'";
      return signalPassFailure();
    }
    func::FuncOp func = getOperation();
    for (Block &block : func.getBody()) {
      switch (*parsed) {
      case Policy::Original:
        break;
      case Policy::Synchronous:
        synchronize(block);
        break;
      case Policy::Fsdp:
        fsdpOrder(block);
        break;
      case Policy::EagerPrefetch: {
        SmallVector<Operation *> starts;
        for (auto start : block.getOps<AllGatherStartOp>())
          starts.push_back(start);
        Operation *previous = nullptr;
        for (Operation *start : starts)
          hoistStart(start, previous);
        [[fallthrough]];
      }
      case Policy::SinkWaits:
        for (WaitOp wait : llvm::to_vector(block.getOps<WaitOp>()))
          sinkWait(wait);
        break;
      }
    }
  }
};

} // namespace
