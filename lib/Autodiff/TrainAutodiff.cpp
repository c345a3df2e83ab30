//===- TrainAutodiff.cpp - loss function to training step -----------------===//

#include "ReverseMode.h"
#include "loom/Autodiff/Passes.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Utils/ShapeChecks.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

namespace loom::autodiff {
#define GEN_PASS_DEF_TRAINAUTODIFFPASS
#include "loom/Autodiff/Passes.h.inc"
} // namespace loom::autodiff

using namespace mlir;
using namespace loom;
using namespace loom::train;
using namespace loom::autodiff;

/// Appends to `func` the gradient of its loss with respect to every
/// `train.param` argument.
static LogicalResult differentiateFunction(func::FuncOp func,
                                           unsigned lossIndex) {
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("train-autodiff expects a single-block function");
  // Adjoints are built from the shapes of the values they belong to.
  if (failed(loom::checkStaticShapes(func, "train-autodiff")))
    return failure();
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (func.getResultAttr(i, TrainDialect::kGradAttrName))
      return func.emitOpError("already returns gradients; train-autodiff "
                              "runs once per function");
  // Appending gradients would leave the in-place table one entry short.
  if (func->hasAttr(TrainDialect::kTiedResultsAttrName))
    return func.emitOpError("is a planned step (")
           << TrainDialect::kTiedResultsAttrName
           << ", from codegen-update-in-place); train-autodiff runs on the "
              "forward";
  for (BlockArgument arg : func.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), TrainDialect::kStateAttrName))
      return func.emitOpError("is already a training step (argument #")
             << arg.getArgNumber()
             << " is optimizer state); train-autodiff runs on the forward";
  Block &block = func.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  Value loss = ret.getOperand(lossIndex);

  SmallVector<Operation *> forward;
  for (Operation &op : block.without_terminator())
    forward.push_back(&op);
  SmallVector<BlockArgument> params;
  for (BlockArgument arg : func.getArguments()) {
    if (!func.getArgAttr(arg.getArgNumber(), TrainDialect::kParamAttrName))
      continue;
    if (!isa<RankedTensorType>(arg.getType()))
      return func.emitOpError("train-autodiff differentiates with respect to "
                              "tensors; parameter argument #")
             << arg.getArgNumber() << " is " << arg.getType();
    params.push_back(arg);
  }

  OpBuilder builder(ret);
  ReverseMode rm(builder);
  for (BlockArgument param : params)
    rm.markActive(param);
  rm.propagateActivity(forward);

  Location loc = ret.getLoc();
  if (rm.isActive(loss)) {
    Value seed;
    if (auto tensorType = dyn_cast<RankedTensorType>(loss.getType()))
      seed = rm.linalg(loc).filled({}, tensorType.getElementType(), 1.0);
    else
      seed = arith::ConstantOp::create(
          builder, loc, builder.getFloatAttr(loss.getType(), 1.0));
    rm.accumulate(loss, seed);
    if (failed(rm.differentiate(forward)))
      return failure();
  }

  SmallVector<Value> grads;
  for (BlockArgument param : params)
    grads.push_back(rm.getAdjointOrZero(param));
  for (auto [param, grad] : llvm::zip(params, grads)) {
    Attribute name =
        func.getArgAttr(param.getArgNumber(), TrainDialect::kParamAttrName);
    NamedAttribute tag(
        StringAttr::get(func.getContext(), TrainDialect::kGradAttrName), name);
    if (failed(func.insertResult(func.getNumResults(), grad.getType(),
                                 DictionaryAttr::get(func.getContext(), tag))))
      return failure();
  }
  ret.getOperandsMutable().append(grads);
  return success();
}

namespace {

struct TrainAutodiffPass
    : public loom::autodiff::impl::TrainAutodiffPassBase<TrainAutodiffPass> {
  using TrainAutodiffPassBase::TrainAutodiffPassBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    TrainAutodiffPassBase::getDependentDialects(registry);
    registry.insert<scf::SCFDialect, TrainDialect>();
  }

  void runOnOperation() override {
    bool changed = false;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      std::optional<unsigned> lossIndex = getLossResultIndex(func);
      if (!lossIndex)
        continue;
      if (failed(differentiateFunction(func, *lossIndex)))
        return signalPassFailure();
      changed = true;
    }
    if (!changed || !cleanup)
      return;
    // Adjoint generics list every forward input; dropping the ones their
    // bodies do not read is what leaves exactly the needed activations live.
    RewritePatternSet patterns(&getContext());
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    OpPassManager pm(ModuleOp::getOperationName());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (failed(runPipeline(pm, getOperation())))
      signalPassFailure();
  }
};

} // namespace
