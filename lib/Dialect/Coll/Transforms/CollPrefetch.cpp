//===- CollPrefetch.cpp - start all-gathers earlier within memory ---------===//

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Analysis/Simulator.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Coll/CollPasses.h"
#include "loom/Dialect/Coll/Retime.h"

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
    std::optional<CostModel> model;
    if (overtake && !(model = getCostModel(func, "coll-prefetch")))
      return signalPassFailure();
    for (Block &block : func.getBody()) {
      int64_t limit =
          MemoryTimeline(block, MemoryTimelineOptions::asPlanned(block))
              .getPeakBytes() +
          int64_t(budgetMb * 1024.0 * 1024.0);
      if (overtake)
        prefetchAllGathersWhereFaster(block, distance, limit, *model);
      else
        hoistStarts(block, CollectiveKind::AllGather, distance, limit,
                    /*overtake=*/false);
    }
  }
};

} // namespace
