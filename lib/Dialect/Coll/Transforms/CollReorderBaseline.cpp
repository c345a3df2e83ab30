//===- CollReorderBaseline.cpp - simple collective orders to compare ------===//

#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Coll/CollPasses.h"

namespace loom::coll {
#define GEN_PASS_DEF_COLLREORDERBASELINEPASS
#include "loom/Dialect/Coll/CollPasses.h.inc"
} // namespace loom::coll

using namespace mlir;
using namespace loom::coll;

namespace {

/// Moves `wait` to just before the first op that uses its result.
void sinkWait(WaitOp wait) {
  Block *block = wait->getBlock();
  Operation *first = block->getTerminator();
  for (Operation *user : wait->getUsers())
    if (Operation *top = block->findAncestorOpInBlock(*user))
      if (top->isBeforeInBlock(first))
        first = top;
  if (wait->getNextNode() != first)
    wait->moveBefore(first);
}

/// Moves `start` up to just after the last definition of its operands.
void hoistStart(Operation *start, Operation *&previousHoisted) {
  Block *block = start->getBlock();
  Operation *after = nullptr;
  for (Value operand : start->getOperands())
    if (Operation *def = operand.getDefiningOp())
      if (Operation *top = block->findAncestorOpInBlock(*def))
        if (!after || after->isBeforeInBlock(top))
          after = top;
  // Keep the original order among hoisted starts (one communication stream).
  if (previousHoisted && (!after || after->isBeforeInBlock(previousHoisted)))
    after = previousHoisted;
  if (after)
    start->moveAfter(after);
  else
    start->moveBefore(&block->front());
  previousHoisted = start;
}

struct CollReorderBaselinePass
    : public loom::coll::impl::CollReorderBaselinePassBase<
          CollReorderBaselinePass> {
  using CollReorderBaselinePassBase::CollReorderBaselinePassBase;

  void runOnOperation() override {
    if (policy != "original" && policy != "sink-waits" &&
        policy != "eager-prefetch") {
      getOperation().emitError()
          << "coll-reorder-baseline: expected policy original, sink-waits or "
             "eager-prefetch, got '"
          << policy << "'";
      return signalPassFailure();
    }
    if (policy == "original")
      return;
    func::FuncOp func = getOperation();
    for (Block &block : func.getBody()) {
      if (policy == "eager-prefetch") {
        SmallVector<Operation *> starts;
        for (auto start : block.getOps<AllGatherStartOp>())
          starts.push_back(start);
        Operation *previous = nullptr;
        for (Operation *start : starts)
          hoistStart(start, previous);
      }
      SmallVector<WaitOp> waits(block.getOps<WaitOp>());
      for (WaitOp wait : waits)
        sinkWait(wait);
    }
  }
};

} // namespace
