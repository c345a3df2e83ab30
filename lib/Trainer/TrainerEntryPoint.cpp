//===- TrainerEntryPoint.cpp - trainer-entry-point ------------------------===//
//
// @loom_step takes one memref per argument and result of the step, in order:
// the buffers the trainer allocates (StepManifest.h's tensors), which
// trainer-manifest later passes from loom_step_packed's pointer array.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Runtime/Symbols.h"
#include "loom/Trainer/Passes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/Path.h"

namespace loom::trainer {
#define GEN_PASS_DEF_TRAINERENTRYPOINTPASS
#include "loom/Trainer/Passes.h.inc"
} // namespace loom::trainer

using namespace mlir;
using namespace loom;
using loom::train::TrainDialect;

int64_t loom::trainer::getPredictedPeakBytes(func::FuncOp step) {
  if (auto timeline = step->getAttrOfType<IntegerAttr>(
          loom::train::TrainDialect::kTimelinePeakBytesAttrName))
    return timeline.getInt();
  return MemoryTimeline(step.getBody().front(), {/*callerOwnedResults=*/true})
      .getPeakBytes();
}

func::FuncOp loom::trainer::findStep(ModuleOp module) {
  // A pipeline stage other than the last returns no loss.
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() &&
        (train::getLossResultIndex(func) ||
         func->hasAttr(loom::train::TrainDialect::kPipelineStageAttrName)))
      return func;
  return {};
}

namespace {

/// Role and name of a tagged argument or result.
std::pair<StringRef, StringRef> roleOf(DictionaryAttr attrs) {
  if (!attrs)
    return {"", ""};
  for (StringRef role :
       {TrainDialect::kParamAttrName, TrainDialect::kStateAttrName,
        TrainDialect::kInputAttrName}) {
    if (Attribute value = attrs.get(role)) {
      auto name = dyn_cast<StringAttr>(value);
      return {role.drop_front(6), name ? name.getValue() : ""};
    }
  }
  if (attrs.get(TrainDialect::kLossAttrName))
    return {"loss", "loss"};
  return {"", ""};
}

/// The step's tensors, as the trainer allocates them.
FailureOr<ArrayAttr> describeTensors(func::FuncOp step) {
  MLIRContext *ctx = step.getContext();
  SmallVector<Attribute> tensors;
  auto fn = cast<FunctionOpInterface>(step.getOperation());
  auto tied = step->getAttrOfType<DenseI64ArrayAttr>(
      loom::train::TrainDialect::kTiedResultsAttrName);
  auto describe = [&](Type type, DictionaryAttr attrs, bool isArg,
                      unsigned index) -> LogicalResult {
    // An argument is named by its own location, a result by the step's.
    Location loc = isArg ? step.getArgument(index).getLoc() : step.getLoc();
    auto tensor = dyn_cast<RankedTensorType>(type);
    StringRef what = isArg ? "argument" : "result";
    if (!tensor || !tensor.hasStaticShape() ||
        train::ManifestTensorAttr::getElementName(tensor.getElementType())
            .empty())
      return emitError(loc)
             << "trainer-entry-point: " << what << " #" << index << " of @"
             << step.getSymName()
             << " must be a static tensor of f32, f64, bf16, i32 or i64, got "
             << type;
    auto [role, name] = roleOf(attrs);
    if (role.empty())
      return emitError(loc)
             << "trainer-entry-point: " << what << " #" << index << " of @"
             << step.getSymName()
             << " has no train role; every argument must be a param, state "
                "or input, and every result the loss, a param or a state";
    auto full = attrs ? attrs.getAs<DenseI64ArrayAttr>(
                            loom::train::TrainDialect::kFullShapeAttrName)
                      : DenseI64ArrayAttr();
    if (!full)
      full = DenseI64ArrayAttr::get(ctx, tensor.getShape());
    bool inPlace =
        !isArg && tied && index < size_t(tied.size()) && tied[index] >= 0;
    auto idBound =
        attrs ? attrs.getAs<IntegerAttr>(TrainDialect::kIdBoundAttrName)
              : IntegerAttr();
    auto described = train::ManifestTensorAttr::getChecked(
        [&] { return emitError(loc, "trainer-entry-point: "); }, ctx,
        StringRef(isArg ? "arg" : "result"), role, name, tensor, full, inPlace,
        idBound ? idBound.getInt() : 0);
    if (!described)
      return failure();
    tensors.push_back(described);
    return success();
  };
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (failed(
            describe(fn.getArgumentTypes()[i], fn.getArgAttrDict(i), true, i)))
      return failure();
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (failed(describe(fn.getResultTypes()[i], fn.getResultAttrDict(i), false,
                        i)))
      return failure();
  return ArrayAttr::get(ctx, tensors);
}

/// The model file: the `source` option, else the module's file name.
std::string sourceOf(ModuleOp module, StringRef source) {
  if (!source.empty())
    return source.str();
  if (auto file = dyn_cast<FileLineColLoc>(module.getLoc()))
    return llvm::sys::path::filename(file.getFilename().getValue()).str();
  return "";
}

/// The manifest of `step`, whose tensors are `tensors`.
FailureOr<train::StepManifestAttr>
describeStep(func::FuncOp step, ArrayAttr tensors, StringRef source) {
  int64_t worldSize = 1;
  WalkResult sizes = step.walk([&](coll::CommWorldOp world) {
    int64_t size = world.getComm().getType().getSize();
    if (ShapedType::isDynamic(size) || (worldSize != 1 && size != worldSize)) {
      world.emitOpError("trainer-entry-point: expected one static world "
                        "size in the step, got ")
          << world.getComm().getType();
      return WalkResult::interrupt();
    }
    worldSize = size;
    return WalkResult::advance();
  });
  if (sizes.wasInterrupted())
    return failure();
  std::optional<int64_t> stage, stages, replicas;
  if (auto attr = step->getAttrOfType<IntegerAttr>(
          TrainDialect::kPipelineStageAttrName)) {
    auto pipeline = step->getAttrOfType<train::PipelineAttr>(
        TrainDialect::kPipelineAttrName);
    stage = attr.getInt();
    stages = pipeline ? pipeline.getStages() : 1;
    replicas = pipeline ? pipeline.getReplicas() : 1;
  }
  auto zero =
      step->getAttrOfType<IntegerAttr>(TrainDialect::kZeroStageAttrName);
  auto optimizer =
      step->getAttrOfType<StringAttr>(TrainDialect::kOptimizerAttrName);
  std::optional<int64_t> scheduled;
  if (auto peak = step->getAttrOfType<IntegerAttr>(
          TrainDialect::kScheduledPeakBytesAttrName))
    scheduled = peak.getInt();
  std::string file = sourceOf(step->getParentOfType<ModuleOp>(), source);
  auto manifest = train::StepManifestAttr::getChecked(
      [&] { return step.emitOpError("trainer-entry-point: "); },
      step.getContext(), worldSize, zero ? zero.getInt() : 0, stage, stages,
      replicas, optimizer ? optimizer.getValue() : "",
      step->getAttrOfType<FloatAttr>(TrainDialect::kLearningRateAttrName),
      StringRef(file), scheduled, trainer::getPredictedPeakBytes(step),
      tensors);
  if (!manifest)
    return failure();
  return manifest;
}

/// Adds @loom_step(memref args..., memref results...) calling `step` and
/// writing its results into the result buffers, or (`train.tied_results`)
/// into the buffers of the arguments they update; `step` becomes private.
func::FuncOp buildEntryFunction(ModuleOp module, func::FuncOp step) {
  OpBuilder builder(module.getBodyRegion());
  builder.setInsertionPointToEnd(module.getBody());
  Location loc = step.getLoc();
  FunctionType type = step.getFunctionType();
  SmallVector<Type> buffers;
  for (Type t : llvm::concat<const Type>(type.getInputs(), type.getResults())) {
    auto tensor = cast<RankedTensorType>(t);
    buffers.push_back(
        MemRefType::get(tensor.getShape(), tensor.getElementType()));
  }
  auto entry = func::FuncOp::create(builder, loc, runtime::symbols::kStep,
                                    builder.getFunctionType(buffers, {}));
  Block *body = entry.addEntryBlock();
  builder.setInsertionPointToStart(body);
  SmallVector<Value> inputs;
  for (auto [index, t] : llvm::enumerate(type.getInputs())) {
    auto toTensor = bufferization::ToTensorOp::create(builder, loc, t,
                                                      body->getArgument(index));
    toTensor.setRestrict(true);
    inputs.push_back(toTensor);
  }
  auto call = func::CallOp::create(builder, loc, step, inputs);
  auto tied = step->getAttrOfType<DenseI64ArrayAttr>(
      loom::train::TrainDialect::kTiedResultsAttrName);
  for (auto [index, result] : llvm::enumerate(call.getResults())) {
    int64_t arg = tied && index < size_t(tied.size()) ? tied[index] : -1;
    auto materialize = bufferization::MaterializeInDestinationOp::create(
        builder, loc, result,
        body->getArgument(arg >= 0 ? unsigned(arg)
                                   : type.getNumInputs() + index));
    materialize.setRestrict(true);
    materialize.setWritable(true);
  }
  func::ReturnOp::create(builder, loc);
  step.setPrivate();
  // The arena is allocated in the step, which is inlined into the entry.
  for (StringRef name : {loom::train::TrainDialect::kArenaBytesAttrName,
                         loom::train::TrainDialect::kArenaBoundBytesAttrName})
    if (Attribute value = step->getAttr(name))
      entry->setAttr(name, value);
  return entry;
}

struct TrainerEntryPointPass
    : public loom::trainer::impl::TrainerEntryPointPassBase<
          TrainerEntryPointPass> {
  using TrainerEntryPointPassBase::TrainerEntryPointPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp step = trainer::findStep(module);
    if (!step) {
      module.emitError("trainer-entry-point: expected a training step (a "
                       "function with a train.loss result), found none");
      return signalPassFailure();
    }
    if (Operation *taken = module.lookupSymbol(runtime::symbols::kStep)) {
      taken->emitOpError("trainer-entry-point: the module already has @")
          << runtime::symbols::kStep;
      return signalPassFailure();
    }
    FailureOr<ArrayAttr> tensors = describeTensors(step);
    if (failed(tensors))
      return signalPassFailure();
    FailureOr<train::StepManifestAttr> manifest =
        describeStep(step, *tensors, source);
    if (failed(manifest))
      return signalPassFailure();
    buildEntryFunction(module, step);
    module->setAttr(TrainDialect::kStepManifestAttrName, *manifest);
  }
};

} // namespace
