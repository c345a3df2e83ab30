//===- TrainerStampOpIds.cpp - trainer-stamp-op-ids -----------------------===//

#include "loom/Analysis/OpIds.h"
#include "loom/Trainer/Passes.h"

namespace loom::trainer {
#define GEN_PASS_DEF_TRAINERSTAMPOPIDSPASS
#include "loom/Trainer/Passes.h.inc"
} // namespace loom::trainer

using namespace mlir;

namespace {

struct TrainerStampOpIdsPass
    : public loom::trainer::impl::TrainerStampOpIdsPassBase<
          TrainerStampOpIdsPass> {
  void runOnOperation() override {
    int64_t next = 0;
    for (auto func : getOperation().getOps<func::FuncOp>())
      for (Block &block : func.getFunctionBody())
        for (Operation &op : block)
          op.setLoc(loom::withOpId(op.getLoc(), next++));
    markAllAnalysesPreserved();
  }
};

} // namespace
