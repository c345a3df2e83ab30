//===- CollReorderBaseline.cpp - the orders users run, to compare with ----===//
//
// Each policy reorders only collective starts and waits (fsdp first merges
// each unit's collectives into flat ones, Merge.h); compute keeps its order.
// See CollPasses.td for what each one is.
//
//===----------------------------------------------------------------------===//

#include "Merge.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Coll/CollPasses.h"
#include "loom/Dialect/Coll/Retime.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/StringSwitch.h"
#include <map>

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

/// The parameter result `index` of `func` is (train.param), or whose
/// gradient it is (train.grad), if either.
StringAttr getResultName(func::FuncOp func, unsigned index) {
  using loom::train::TrainDialect;
  if (auto name = func.getResultAttrOfType<StringAttr>(
          index, TrainDialect::kParamAttrName))
    return name;
  return func.getResultAttrOfType<StringAttr>(index,
                                              TrainDialect::kGradAttrName);
}

/// The unit whose parameters each op's results flow into: the
/// train::getParamGroup of the updated parameters (or gradients) the
/// function returns that they reach. A gradient's reduce-scatter reaches its
/// parameter's update, and so does a gather of an updated parameter
/// (ZeRO-1/2); the loss, and anything the forward computes, reach several
/// units and so none in particular.
class UnitReach {
public:
  UnitReach(func::FuncOp func, Block &block) {
    if (!block.mightHaveTerminator())
      return;
    Operation *terminator = block.getTerminator();
    bool returns =
        isa<func::ReturnOp>(terminator) && terminator->getParentOp() == func;
    // Users come after their operands' definitions: one sweep from the end.
    for (Operation &op : llvm::reverse(block)) {
      Reach here;
      for (Value result : op.getResults())
        for (OpOperand &use : result.getUses()) {
          if (use.getOwner() == terminator) {
            if (StringAttr name = getResultName(func, use.getOperandNumber());
                name && returns)
              here.add(loom::train::getParamGroup(name.getValue()));
            continue;
          }
          if (Operation *user = block.findAncestorOpInBlock(*use.getOwner()))
            if (auto it = reach.find(user); it != reach.end())
              here.add(it->second);
        }
      if (here.many || here.unit)
        reach[&op] = std::move(here);
    }
  }

  /// The one unit `op`'s results reach, if there is one.
  std::optional<std::string> lookup(Operation *op) const {
    auto it = reach.find(op);
    if (it == reach.end() || it->second.many)
      return std::nullopt;
    return it->second.unit;
  }

private:
  struct Reach {
    bool many = false;
    std::optional<std::string> unit;
    void add(StringRef other) {
      if (many || (unit && *unit == other))
        return;
      if (unit) {
        many = true;
        unit.reset();
        return;
      }
      unit = other.str();
    }
    void add(const Reach &other) {
      if (other.many) {
        many = true;
        unit.reset();
      } else if (other.unit) {
        add(*other.unit);
      }
    }
  };
  DenseMap<Operation *, Reach> reach;
};

/// `members` in classes that may merge (one communicator, element type and
/// reduction each), in the order of their first members.
SmallVector<SmallVector<MergeMember>>
splitMergeable(ArrayRef<MergeMember> members) {
  SmallVector<SmallVector<MergeMember>> classes;
  for (const MergeMember &m : members) {
    auto it = llvm::find_if(classes, [&](ArrayRef<MergeMember> c) {
      return areMergeable(c.front().start, m.start);
    });
    if (it == classes.end())
      classes.push_back({m});
    else
      it->push_back(m);
  }
  return classes;
}

/// FSDP's flat parameters, on the synchronous order (which it leaves): each
/// unit's gathers for one use (every parameter's first gather, the
/// forward's; then its second, the backward's) become one all-gather where
/// the first of them started, and its gradients' reduce-scatters one
/// reduce-scatter, launched once the unit's last gradient exists.
void mergeUnits(func::FuncOp func, Block &block) {
  UnitReach reach(func, block);
  // Groups keyed by unit and use; gathers of anything but a parameter (an
  // updated parameter's, in ZeRO-1/2) are a use of their own.
  constexpr unsigned kNotParameter = ~0u;
  std::map<std::pair<std::string, unsigned>, SmallVector<MergeMember>> gathers;
  std::map<std::string, SmallVector<MergeMember>> reductions;
  DenseMap<Value, unsigned> uses;
  for (Operation &op : block) {
    auto start = dyn_cast<CollectiveOpInterface>(&op);
    auto wait = start ? dyn_cast_or_null<WaitOp>(start.getWait()) : nullptr;
    if (!wait || wait->getBlock() != &block)
      continue;
    if (auto gather = dyn_cast<AllGatherStartOp>(&op)) {
      if (std::optional<std::string> unit = getUnit(gather))
        gathers[{*unit, uses[gather.getInput()]++}].push_back({&op, wait});
      else if (std::optional<std::string> unit = reach.lookup(wait))
        gathers[{*unit, kNotParameter}].push_back({&op, wait});
    } else if (isa<ReduceScatterStartOp>(&op)) {
      if (std::optional<std::string> unit = reach.lookup(wait))
        reductions[*unit].push_back({&op, wait});
    }
  }
  for (auto &[key, members] : gathers)
    for (SmallVector<MergeMember> &merged : splitMergeable(members))
      if (canMergeAllGathers(merged))
        mergeAllGathers(merged, /*copyOut=*/true);
  for (auto &[unit, members] : reductions)
    for (SmallVector<MergeMember> &merged : splitMergeable(members)) {
      // Waited at their first uses, after the last gradient.
      for (MergeMember &m : merged)
        sinkWait(m.wait);
      if (canMergeReduceScatters(merged))
        mergeReduceScatters(merged);
    }
  synchronize(block);
}

/// Returns true if every operand of `op`, except those `except` defines, is
/// defined before `point` (or outside the block).
bool operandsDefinedBefore(Operation *op, Operation *point,
                           Operation *except = nullptr) {
  Block *block = op->getBlock();
  return llvm::all_of(op->getOperands(), [&](Value operand) {
    Operation *def = operand.getDefiningOp();
    Operation *top = def ? block->findAncestorOpInBlock(*def) : nullptr;
    return !top || top == except || top->isBeforeInBlock(point);
  });
}

/// A merged gather's copy-in (FSDP2's): the concatenation of its shards,
/// which only it reads. It moves with the start.
Operation *getCopyIn(Operation *start) {
  auto concat = cast<CollectiveOpInterface>(start)
                    .getInput()
                    .getDefiningOp<tensor::ConcatOp>();
  return concat && concat->hasOneUse() &&
                 concat->getBlock() == start->getBlock()
             ? concat.getOperation()
             : nullptr;
}

/// One use of a unit: its merged gather, or where merging was refused, a run
/// of consecutive gathers of its parameters (the forward uses each block
/// once, the backward again in reverse).
struct Occurrence {
  SmallVector<AllGatherStartOp> starts;
  /// The first compute op after its first gather: where its compute starts.
  Operation *marker = nullptr;
};

/// PyTorch FSDP's policy (FSDP2's defaults, each transformer block a unit):
/// one flat all-gather per unit and use, one flat reduce-scatter per unit; a
/// unit's gather starts when the previous unit's compute starts and is
/// waited before its own compute, so at most two gathered units are alive; a
/// reduce-scatter starts when the unit's last gradient exists and is waited
/// when the next unit's backward ends.
void fsdpOrder(func::FuncOp func, Block &block) {
  // From whatever order came in: gathers at their uses, reductions at their
  // inputs.
  synchronize(block);
  mergeUnits(func, block);
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
      Operation *copyIn = getCopyIn(next);
      Operation *first = copyIn ? copyIn : next.getOperation();
      if (!marker->isBeforeInBlock(first) ||
          !operandsDefinedBefore(first, marker) ||
          !operandsDefinedBefore(next, marker, copyIn))
        continue;
      if (copyIn)
        copyIn->moveBefore(marker);
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
        fsdpOrder(func, block);
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
