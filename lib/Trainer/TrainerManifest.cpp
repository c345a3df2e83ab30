//===- TrainerManifest.cpp - trainer-manifest -----------------------------===//
//
// The two symbols a compiled step exports to the trainer main:
//
//   void loom_step_packed(void **buffers);
//     buffers[i] is the data pointer of the step's i-th argument, then of
//     its i-th result (row-major, dense, the manifest's local shapes). The
//     step reads the arguments and writes every result into its buffer; a
//     result the manifest marks `in-place` is written into the buffer of
//     the argument it updates instead (its own pointer is not used).
//   const char loom_step_manifest[];
//     StepManifest's text, NUL-terminated.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Runtime/StepManifest.h"
#include "loom/Runtime/Symbols.h"
#include "loom/Trainer/Passes.h"

namespace loom::trainer {
#define GEN_PASS_DEF_TRAINERMANIFESTPASS
#include "loom/Trainer/Passes.h.inc"
} // namespace loom::trainer

using namespace mlir;
using namespace loom;
using loom::runtime::StepManifest;
using loom::runtime::StepTensor;
namespace symbols = loom::runtime::symbols;

namespace {} // namespace

StepManifest loom::trainer::getRuntimeManifest(train::StepManifestAttr attr) {
  StepManifest manifest;
  auto &p = manifest.properties;
  p["world_size"] = std::to_string(attr.getWorldSize());
  p["zero_stage"] = std::to_string(attr.getZeroStage());
  if (attr.getPipelineStage()) {
    p["pipeline_stage"] = std::to_string(*attr.getPipelineStage());
    p["pipeline_stages"] = std::to_string(*attr.getPipelineStages());
    p["pipeline_replicas"] = std::to_string(*attr.getPipelineReplicas());
  }
  if (!attr.getOptimizer().empty())
    p["optimizer"] = attr.getOptimizer().str();
  if (FloatAttr lr = attr.getLr()) {
    // As the trainer parses it (strtod), at raw_ostream's precision.
    std::string text;
    llvm::raw_string_ostream(text) << lr.getValueAsDouble();
    p["lr"] = text;
  }
  p["source"] = attr.getSource().str();
  if (attr.getScheduledPeakBytes())
    p["scheduled_peak_bytes"] = std::to_string(*attr.getScheduledPeakBytes());
  p["predicted_peak_bytes"] = std::to_string(attr.getPredictedPeakBytes());
  for (auto tensor :
       attr.getTensors().getAsRange<train::ManifestTensorAttr>()) {
    StepTensor t;
    t.isArgument = tensor.isArgument();
    t.role = tensor.getRole().str();
    t.name = tensor.getName().str();
    t.dtype = train::ManifestTensorAttr::getElementName(
                  tensor.getType().getElementType())
                  .str();
    t.localShape.assign(tensor.getType().getShape().begin(),
                        tensor.getType().getShape().end());
    t.fullShape.assign(tensor.getFullShape().asArrayRef().begin(),
                       tensor.getFullShape().asArrayRef().end());
    t.inPlace = tensor.getInPlace();
    t.bound = tensor.getIdBound();
    manifest.tensors.push_back(std::move(t));
  }
  return manifest;
}

namespace {

/// The sum of an integer attribute over the module's ops.
int64_t sumAttr(Operation *root, StringRef name) {
  int64_t sum = 0;
  root->walk([&](Operation *op) {
    if (auto value = op->getAttrOfType<IntegerAttr>(name))
      sum += value.getInt();
  });
  return sum;
}

/// Adds loom_step_packed, calling @loom_step with one memref descriptor per
/// tensor of `manifest`, and the manifest global.
LogicalResult buildPackedEntry(ModuleOp module, const StepManifest &manifest) {
  auto entry = module.lookupSymbol<LLVM::LLVMFuncOp>(symbols::kStep);
  if (!entry)
    return module.emitError("trainer-manifest: expected the lowered @")
           << symbols::kStep << " (run trainer-entry-point, then lower)";
  MLIRContext *ctx = module.getContext();
  OpBuilder builder(ctx);
  builder.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  Type i64 = builder.getI64Type();

  std::string text = manifest.print();
  text.push_back('\0');
  LLVM::GlobalOp::create(
      builder, loc, LLVM::LLVMArrayType::get(builder.getI8Type(), text.size()),
      /*isConstant=*/true, LLVM::Linkage::External, symbols::kStepManifest,
      builder.getStringAttr(text));

  auto packed = LLVM::LLVMFuncOp::create(
      builder, loc, symbols::kStepPacked,
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr}));
  Block *body = packed.addEntryBlock(builder);
  builder.setInsertionPointToStart(body);
  auto constant = [&](int64_t v) -> Value {
    return LLVM::ConstantOp::create(builder, loc, i64,
                                    builder.getI64IntegerAttr(v));
  };
  SmallVector<Value> args;
  for (auto [index, tensor] : llvm::enumerate(manifest.tensors)) {
    Value slot =
        LLVM::GEPOp::create(builder, loc, ptr, ptr, body->getArgument(0),
                            ArrayRef<LLVM::GEPArg>{int32_t(index)});
    Value data = LLVM::LoadOp::create(builder, loc, ptr, slot);
    // The descriptor: allocated, aligned, offset, sizes, strides.
    args.append({data, data, constant(0)});
    ArrayRef<int64_t> shape = tensor.localShape;
    SmallVector<int64_t> strides(shape.size());
    int64_t stride = 1;
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      strides[d] = stride;
      stride *= shape[d];
    }
    for (int64_t size : shape)
      args.push_back(constant(size));
    for (int64_t s : strides)
      args.push_back(constant(s));
  }
  if (args.size() != entry.getNumArguments())
    return entry.emitError("trainer-manifest: expected ")
           << args.size() << " lowered arguments for the manifest's "
           << manifest.tensors.size() << " tensors, got "
           << entry.getNumArguments();
  LLVM::CallOp::create(builder, loc, entry, args);
  LLVM::ReturnOp::create(builder, loc, ValueRange{});
  return success();
}

struct TrainerManifestPass
    : public loom::trainer::impl::TrainerManifestPassBase<TrainerManifestPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto attr = module->getAttrOfType<train::StepManifestAttr>(
        train::TrainDialect::kStepManifestAttrName);
    if (!attr) {
      module.emitError("trainer-manifest: expected the module's ")
          << train::TrainDialect::kStepManifestAttrName
          << " (run trainer-entry-point first)";
      return signalPassFailure();
    }
    StepManifest manifest = trainer::getRuntimeManifest(attr);
    // The buffers the trainer allocates, then the arena of the plan and
    // what bufferisation allocated outside it (packed).
    int64_t buffers = 0;
    for (const StepTensor &t : manifest.tensors)
      buffers += t.inPlace ? 0 : t.getBytes();
    int64_t arena =
        sumAttr(module, loom::train::TrainDialect::kArenaBytesAttrName);
    int64_t packed =
        sumAttr(module, loom::train::TrainDialect::kPackedBytesAttrName);
    auto &p = manifest.properties;
    p["planned_arena_bytes"] = std::to_string(arena + packed);
    p["unplanned_bytes"] = std::to_string(packed);
    // No placement of the planned buffers is smaller than this; the plan's
    // peak is the timeline's when the arena reaches it.
    p["planned_arena_bound_bytes"] = std::to_string(
        sumAttr(module, loom::train::TrainDialect::kArenaBoundBytesAttrName) +
        sumAttr(module, loom::train::TrainDialect::kPackedBoundBytesAttrName));
    p["planned_peak_bytes"] = std::to_string(arena + packed + buffers);
    if (failed(buildPackedEntry(module, manifest)))
      return signalPassFailure();
    module->removeAttr(train::TrainDialect::kStepManifestAttrName);
  }
};

} // namespace
