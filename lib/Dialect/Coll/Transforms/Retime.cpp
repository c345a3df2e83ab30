//===- Retime.cpp - moves of collective starts and waits ------------------===//

#include "loom/Dialect/Coll/Retime.h"
#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Analysis/Simulator.h"
#include "loom/Dialect/Coll/CollOps.h"

using namespace mlir;
using namespace loom;
using namespace loom::coll;

Operation *loom::coll::getLastOperandDef(Operation *op) {
  Block *block = op->getBlock();
  Operation *after = nullptr;
  for (Value operand : op->getOperands())
    if (Operation *def = operand.getDefiningOp())
      if (Operation *top = block->findAncestorOpInBlock(*def))
        if (!after || after->isBeforeInBlock(top))
          after = top;
  return after;
}

void loom::coll::sinkWait(WaitOp wait) {
  Block *block = wait->getBlock();
  Operation *first = block->getTerminator();
  for (Operation *user : wait->getUsers())
    if (Operation *top = block->findAncestorOpInBlock(*user))
      if (top->isBeforeInBlock(first))
        first = top;
  if (wait->getNextNode() != first)
    wait->moveBefore(first);
}

void loom::coll::synchronize(Block &block) {
  SmallVector<CollectiveOpInterface> starts(
      block.getOps<CollectiveOpInterface>());
  for (CollectiveOpInterface start : starts) {
    auto wait = dyn_cast_or_null<WaitOp>(start.getWait());
    if (!wait || wait->getBlock() != &block)
      continue;
    // Transfers keep their places: receives from a peer are posted in the
    // order it sends (which is how they are matched), and where a send may
    // complete without a deadlock is the pipeline's decision (pp-partition).
    if (start.isPointToPoint())
      continue;
    if (start.getKind() == CollectiveKind::AllGather ||
        start.getKind() == CollectiveKind::Broadcast) {
      // Down to the first use: its operands are defined above already.
      sinkWait(wait);
      start->moveBefore(wait);
      continue;
    }
    if (Operation *def = getLastOperandDef(start))
      start->moveAfter(def);
    else
      start->moveBefore(&block.front());
    wait->moveAfter(start);
  }
}

SmallVector<Operation *> loom::coll::getBlockOrder(Block &block) {
  SmallVector<Operation *> order;
  for (Operation &op : block)
    order.push_back(&op);
  return order;
}

void loom::coll::setBlockOrder(Block &block, ArrayRef<Operation *> order) {
  Operation *terminator = block.getTerminator();
  for (Operation *op : order)
    if (op != terminator)
      op->moveBefore(terminator);
}

void loom::coll::prefetchAllGathersWhereFaster(Block &block, unsigned distance,
                                               int64_t limit,
                                               const CostModel &model) {
  SmallVector<Operation *> original = getBlockOrder(block);
  SimulationOptions timesOnly{/*events=*/false, /*memory=*/false};
  if (!hoistStarts(block, CollectiveKind::AllGather, distance, limit,
                   /*overtake=*/true))
    return;
  double overtaking = simulate(block, model, timesOnly).makespan;
  SmallVector<Operation *> overtaken = getBlockOrder(block);
  setBlockOrder(block, original);
  hoistStarts(block, CollectiveKind::AllGather, distance, limit,
              /*overtake=*/false);
  if (overtaking < simulate(block, model, timesOnly).makespan)
    setBlockOrder(block, overtaken);
}

bool loom::coll::hoistStarts(Block &block, CollectiveKind kind,
                             unsigned distance, int64_t limit, bool overtake) {
  SmallVector<Operation *> order = getBlockOrder(block);
  MemoryTimeline timeline(block, order,
                          MemoryTimelineOptions::asPlanned(block));
  std::vector<int64_t> live(timeline.getLiveBytes().begin(),
                            timeline.getLiveBytes().end());
  bool moved = false;

  // Starts are taken in block order and each only moves up, among the ops
  // before it, so a start's position is still its original one when its
  // turn comes.
  SmallVector<std::pair<Operation *, unsigned>> starts;
  for (auto [index, op] : llvm::enumerate(order))
    if (auto start = dyn_cast<CollectiveOpInterface>(op);
        start && start.getKind() == kind)
      starts.push_back({op, unsigned(index)});
  for (auto [start, position] : starts) {
    assert(order[position] == start && "a later start was displaced");
    auto collective = cast<CollectiveOpInterface>(start);
    int64_t bytes = collective.getResultBytes().value_or(0);
    // The earliest position: after the operands' definitions and the
    // previous collective on the same communicator, and within distance.
    unsigned earliest = position > distance ? position - distance : 0;
    for (unsigned i = position; i-- > earliest;) {
      Operation *op = order[i];
      bool defines = llvm::any_of(start->getOperands(), [&](Value v) {
        return v.getDefiningOp() == op;
      });
      // With `overtake` a start may pass collectives of other kinds on its
      // communicator (the stream then runs it first), but never one of its
      // own kind or a broadcast: their relative order is kept.
      auto other = dyn_cast<CollectiveOpInterface>(op);
      bool ordered =
          other &&
          getRootComm(other.getComm()) == getRootComm(collective.getComm()) &&
          (!overtake || other.getKind() == kind ||
           other.getKind() == CollectiveKind::Broadcast);
      if (defines || ordered) {
        earliest = i + 1;
        break;
      }
    }
    // Walk up while every op the move spans stays under the limit.
    unsigned target = position;
    int64_t spanMax = 0;
    for (unsigned i = position; i-- > earliest;) {
      spanMax = std::max(spanMax, live[i]);
      if (spanMax + bytes > limit)
        break;
      target = i;
    }
    if (target == position)
      continue;
    // The spanned ops now hold the gathered buffer too; the start itself
    // is charged conservatively with the first spanned op's bytes.
    for (unsigned i = target; i < position; ++i)
      live[i] += bytes;
    // Rotate the span rather than erase and insert: the cost stays within
    // the distance, not the block.
    live[position] = live[target];
    std::rotate(order.begin() + target, order.begin() + position,
                order.begin() + position + 1);
    std::rotate(live.begin() + target, live.begin() + position,
                live.begin() + position + 1);
    moved = true;
  }
  if (moved)
    setBlockOrder(block, order);
  return moved;
}
