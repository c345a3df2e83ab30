//===- TrainerRecordScheduledPeak.cpp - trainer-record-scheduled-peak -----===//

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Trainer/Passes.h"

namespace loom::trainer {
#define GEN_PASS_DEF_TRAINERRECORDSCHEDULEDPEAKPASS
#include "loom/Trainer/Passes.h.inc"
} // namespace loom::trainer

using namespace mlir;

namespace {

struct TrainerRecordScheduledPeakPass
    : public loom::trainer::impl::TrainerRecordScheduledPeakPassBase<
          TrainerRecordScheduledPeakPass> {
  void runOnOperation() override {
    func::FuncOp step = loom::trainer::findStep(getOperation());
    if (!step) {
      getOperation().emitError("trainer-record-scheduled-peak: expected a "
                               "training step (a function with a train.loss "
                               "result), found none");
      return signalPassFailure();
    }
    Builder builder(&getContext());
    step->setAttr(
        loom::train::TrainDialect::kScheduledPeakBytesAttrName,
        builder.getI64IntegerAttr(
            loom::MemoryTimeline(
                step.getBody().front(),
                loom::MemoryTimelineOptions::asPlanned(step.getBody().front()))
                .getPeakBytes()));
    markAllAnalysesPreserved();
  }
};

} // namespace
