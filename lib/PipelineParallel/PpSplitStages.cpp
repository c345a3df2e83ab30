//===- PpSplitStages.cpp - one module per pipeline stage ------------------===//
//
// Moves each stage's functions (train.pipeline_stage = s) into a nested
// module @stage<s>, with a copy of every function of no stage, so that the
// phases after the training step compile each stage on its own.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/PipelineParallel/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include <map>

namespace loom::pp {
#define GEN_PASS_DEF_PPSPLITSTAGESPASS
#include "loom/PipelineParallel/Passes.h.inc"
} // namespace loom::pp

using namespace mlir;
using namespace loom;

namespace {

struct PPSplitStagesPass
    : public loom::pp::impl::PPSplitStagesPassBase<PPSplitStagesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::map<int64_t, SmallVector<func::FuncOp>> stages;
    SmallVector<func::FuncOp> shared;
    for (Operation &op : module.getOps()) {
      auto func = dyn_cast<func::FuncOp>(op);
      if (!func) {
        if (isa<ModuleOp>(op) &&
            op.hasAttr(train::TrainDialect::kPipelineStageAttrName)) {
          op.emitError("pp-split-stages: the module is split already");
          return signalPassFailure();
        }
        continue;
      }
      auto index = func->getAttrOfType<IntegerAttr>(
          train::TrainDialect::kPipelineStageAttrName);
      if (!index) {
        shared.push_back(func);
        continue;
      }
      stages[index.getInt()].push_back(func);
    }
    if (stages.empty())
      return;
    int64_t expected = 0;
    for (auto &[index, funcs] : stages) {
      if (index != expected) {
        funcs.front().emitError()
            << "pp-split-stages: stage " << index << " without stage "
            << expected << " (stages number from 0 without a gap)";
        return signalPassFailure();
      }
      ++expected;
    }
    for (Operation &op : module.getOps())
      if (!isa<func::FuncOp>(op)) {
        op.emitError() << "pp-split-stages: '" << op.getName()
                       << "' beside the stages' functions: only functions "
                          "are split";
        return signalPassFailure();
      }
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    for (auto &[index, funcs] : stages) {
      auto stage = ModuleOp::create(builder, module.getLoc(),
                                    ("stage" + Twine(index)).str());
      stage->setAttr(train::TrainDialect::kPipelineStageAttrName,
                     builder.getI64IntegerAttr(index));
      // A stage compiles on its own (even detached), for the same target.
      if (Attribute target =
              module->getAttr(train::TrainDialect::kTargetAttrName))
        stage->setAttr(train::TrainDialect::kTargetAttrName, target);
      Block *body = stage.getBody();
      for (func::FuncOp func : shared)
        body->push_back(func->clone());
      for (func::FuncOp func : funcs)
        func->moveBefore(body, body->end());
    }
    for (func::FuncOp func : shared)
      func.erase();
  }
};

} // namespace
