//===- TrainContractAttrs.cpp - what passes hand each other ---------------===//
//
// The verifiers of the attributes one training pass writes and a later one
// reads (TrainContractAttrs.td): a lowered op's footprint, a pipeline
// stage's grid, and the trainer's manifest.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>

using namespace mlir;
using namespace loom::train;

LogicalResult
FootprintAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      int64_t scratch, DenseI64ArrayAttr inPlace,
                      DenseI64ArrayAttr tables) {
  if (scratch < 0)
    return emitError() << "expected scratch >= 0 bytes, got " << scratch;
  if (!inPlace)
    return emitError() << "expected in_place, one entry per result";
  for (int64_t operand : inPlace.asArrayRef())
    if (operand < -1)
      return emitError() << "expected in_place entries >= -1 (an operand "
                            "index, or -1: none), got "
                         << operand;
  if (tables) {
    ArrayRef<int64_t> pairs = tables.asArrayRef();
    if (pairs.size() % 2)
      return emitError() << "expected tables as (key, bytes) pairs, got "
                         << pairs.size() << " entries";
    for (size_t i = 1; i < pairs.size(); i += 2)
      if (pairs[i] < 0)
        return emitError() << "expected table bytes >= 0, got " << pairs[i];
  }
  return success();
}

LogicalResult PipelineAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t stages, int64_t microbatches,
                                   int64_t replicas, StringRef schedule,
                                   StringRef) {
  if (stages < 1 || microbatches < 1 || replicas < 1)
    return emitError() << "expected stages, microbatches and replicas >= 1, "
                          "got "
                       << stages << ", " << microbatches << " and " << replicas;
  if (!llvm::is_contained({"gpipe", "1f1b", "zb-h1"}, schedule))
    return emitError() << "expected the schedule gpipe, 1f1b or zb-h1, got \""
                       << schedule << "\"";
  return success();
}

TargetAttr loom::train::getTarget(Operation *op) {
  for (; op; op = op->getParentOp())
    if (isa<ModuleOp>(op))
      if (auto target =
              op->getAttrOfType<TargetAttr>(TrainDialect::kTargetAttrName))
        return target;
  return {};
}

StringRef ManifestTensorAttr::getElementName(Type element) {
  if (element.isF32())
    return "f32";
  if (element.isF64())
    return "f64";
  if (element.isBF16())
    return "bf16";
  if (element.isSignlessInteger(32))
    return "i32";
  if (element.isSignlessInteger(64))
    return "i64";
  return "";
}

LogicalResult
ManifestTensorAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           StringRef kind, StringRef role, StringRef name,
                           RankedTensorType type, DenseI64ArrayAttr fullShape,
                           bool inPlace, int64_t idBound) {
  if (kind != "arg" && kind != "result")
    return emitError() << "expected kind \"arg\" or \"result\", got \"" << kind
                       << "\"";
  if (!llvm::is_contained({"param", "state", "input", "loss"}, role))
    return emitError() << "expected role param, state, input or loss, got \""
                       << role << "\"";
  if (name.empty() || llvm::any_of(name, [](char c) {
        return c == ' ' || c == '\n' || c == '\t';
      }))
    return emitError() << "expected a name without blanks, got \"" << name
                       << "\"";
  if (role == "loss" && (kind != "result" || type.getRank() != 0))
    return emitError() << "expected the loss to be a scalar result";
  if (role == "input" && kind != "arg")
    return emitError() << "expected an input to be an argument";
  if (inPlace && kind != "result")
    return emitError() << "only a result is written in place";
  if (idBound < 0 ||
      (idBound > 0 &&
       (role != "input" || !isa<IntegerType>(type.getElementType()))))
    return emitError() << "expected id_bound 0, or > 0 on an input of "
                          "integers, got "
                       << idBound;
  if (!type.hasStaticShape() || getElementName(type.getElementType()).empty())
    return emitError() << "expected a static tensor of f32, f64, bf16, i32 "
                          "or i64, got "
                       << type;
  // A ZeRO shard is a flat slice of the whole: the full shape's rank may
  // differ, but it holds at least the shard's elements.
  if (!fullShape ||
      llvm::any_of(fullShape.asArrayRef(), [](int64_t d) { return d < 0; }))
    return emitError() << "expected a full_shape of sizes >= 0";
  int64_t full = 1;
  for (int64_t d : fullShape.asArrayRef())
    if (llvm::MulOverflow(full, d, full))
      return emitError() << "full_shape " << fullShape << " overflows";
  if (full < type.getNumElements())
    return emitError() << "expected full_shape " << fullShape
                       << " to hold at least the local " << type;
  return success();
}

LogicalResult StepManifestAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t worldSize,
    int64_t zeroStage, std::optional<int64_t> pipelineStage,
    std::optional<int64_t> pipelineStages,
    std::optional<int64_t> pipelineReplicas, StringRef optimizer, FloatAttr lr,
    StringRef source, std::optional<int64_t> scheduledPeakBytes,
    int64_t predictedPeakBytes, ArrayAttr tensors) {
  if (worldSize < 1)
    return emitError() << "expected world_size >= 1, got " << worldSize;
  if (zeroStage < 0 || zeroStage > 3)
    return emitError() << "expected zero_stage in [0, 3], got " << zeroStage;
  bool staged = pipelineStage.has_value();
  if (pipelineStages.has_value() != staged ||
      pipelineReplicas.has_value() != staged)
    return emitError() << "expected pipeline_stage, pipeline_stages and "
                          "pipeline_replicas together";
  if (staged && (*pipelineStages < 1 || *pipelineReplicas < 1 ||
                 *pipelineStage < 0 || *pipelineStage >= *pipelineStages ||
                 *pipelineStages * *pipelineReplicas != worldSize))
    return emitError() << "expected stage " << *pipelineStage << " below "
                       << *pipelineStages << " stages, and stages x replicas ("
                       << *pipelineReplicas << ") equal to the world size ("
                       << worldSize << ")";
  if (!optimizer.empty() && optimizer != "adamw" && optimizer != "sgd")
    return emitError()
           << "expected optimizer \"adamw\", \"sgd\" or none, got \""
           << optimizer << "\"";
  if (lr && !(lr.getType().isF64() && std::isfinite(lr.getValueAsDouble()) &&
              lr.getValueAsDouble() >= 0))
    return emitError() << "expected lr to be a finite f64 >= 0, got " << lr;
  if (llvm::any_of(source, [](char c) { return c == '\n'; }))
    return emitError() << "expected a source on one line";
  if ((scheduledPeakBytes && *scheduledPeakBytes < 0) || predictedPeakBytes < 0)
    return emitError() << "expected peaks >= 0 bytes";
  bool results = false;
  for (Attribute tensor : tensors) {
    auto t = dyn_cast<ManifestTensorAttr>(tensor);
    if (!t)
      return emitError() << "expected tensors to be #train.manifest_tensor, "
                            "got "
                         << tensor;
    if (t.isArgument() && results)
      return emitError() << "expected the arguments before the results";
    results |= !t.isArgument();
  }
  return success();
}
