//===- CollPrefetch.cpp - start all-gathers earlier within memory ---------===//

#include "Prefetch.h"
#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Coll/CollPasses.h"

namespace loom::coll {
#define GEN_PASS_DEF_COLLPREFETCHPASS
#include "loom/Dialect/Coll/CollPasses.h.inc"
} // namespace loom::coll

using namespace mlir;
using namespace loom;
using namespace loom::coll;

namespace {

struct CollPrefetchPass
    : public loom::coll::impl::CollPrefetchPassBase<CollPrefetchPass> {
  using CollPrefetchPassBase::CollPrefetchPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (budgetMb < 0) {
      func.emitError() << "coll-prefetch: expected budget-mb >= 0, got "
                       << static_cast<double>(budgetMb);
      return signalPassFailure();
    }
    for (Block &block : func.getBody()) {
      int64_t limit = MemoryTimeline(block).getPeakBytes() +
                      int64_t(budgetMb * 1024.0 * 1024.0);
      prefetchAllGathers(block, distance, limit);
    }
  }
};

} // namespace

bool loom::coll::prefetchAllGathers(Block &block, unsigned distance,
                                    int64_t limit) {
  std::vector<Operation *> order;
  for (Operation &op : block)
    order.push_back(&op);
  MemoryTimeline timeline(block, order);
  std::vector<int64_t> live(timeline.getLiveBytes().begin(),
                            timeline.getLiveBytes().end());
  bool moved = false;

  SmallVector<Operation *> starts;
  for (auto start : block.getOps<AllGatherStartOp>())
    starts.push_back(start);
  for (Operation *start : starts) {
    auto collective = cast<CollectiveOpInterface>(start);
    int64_t bytes = collective.getResultBytes().value_or(0);
    unsigned position = llvm::find(order, start) - order.begin();
    // The earliest position: after the operands' definitions and the
    // previous collective on the same communicator, and within distance.
    unsigned earliest = position > distance ? position - distance : 0;
    for (unsigned i = position; i-- > earliest;) {
      Operation *op = order[i];
      bool defines = llvm::any_of(start->getOperands(), [&](Value v) {
        return v.getDefiningOp() == op;
      });
      auto other = dyn_cast<CollectiveOpInterface>(op);
      if (defines || (other && other.getComm() == collective.getComm())) {
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
    int64_t startLive = live[target];
    order.erase(order.begin() + position);
    live.erase(live.begin() + position);
    order.insert(order.begin() + target, start);
    live.insert(live.begin() + target, startLive);
    moved = true;
  }
  if (!moved)
    return false;
  Operation *terminator = block.getTerminator();
  for (Operation *op : order)
    if (op != terminator)
      op->moveBefore(terminator);
  return true;
}
