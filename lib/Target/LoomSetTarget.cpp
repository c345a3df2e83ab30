//===- LoomSetTarget.cpp - loom-set-target --------------------------------===//

#include "loom/Analysis/CostModel.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Target/Passes.h"

namespace loom::target {
#define GEN_PASS_DEF_LOOMSETTARGETPASS
#include "loom/Target/Passes.h.inc"
} // namespace loom::target

using namespace mlir;
using namespace loom;

namespace {

struct LoomSetTargetPass
    : public target::impl::LoomSetTargetPassBase<LoomSetTargetPass> {
  using LoomSetTargetPassBase::LoomSetTargetPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (device.empty()) {
      emitError(module.getLoc()) << "loom-set-target: expected device=<name in "
                                    "devices/ or a .json path>";
      return signalPassFailure();
    }
    llvm::Expected<DeviceDescription> description =
        DeviceDescription::load(device);
    if (!description) {
      emitError(module.getLoc())
          << "loom-set-target: " << toString(description.takeError());
      return signalPassFailure();
    }
    train::ProfileAttr measured;
    if (!profile.empty()) {
      llvm::Expected<Profile> loaded = Profile::load(profile);
      if (!loaded) {
        emitError(module.getLoc())
            << "loom-set-target: " << toString(loaded.takeError());
        return signalPassFailure();
      }
      measured = loaded->toAttr(&getContext());
    }
    module->setAttr(train::TrainDialect::kTargetAttrName,
                    description->toAttr(&getContext(), measured));
    markAllAnalysesPreserved();
  }
};

} // namespace
