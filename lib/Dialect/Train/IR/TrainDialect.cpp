//===- TrainDialect.cpp - train dialect and its role attributes -----------===//

#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>
#include <limits>

using namespace mlir;
using namespace loom::train;

#include "loom/Dialect/Train/TrainOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Train/TrainAttributes.cpp.inc"

namespace {
/// Train ops are pure tensor computations with no regions of their own, so
/// a call to a function made of them may be inlined anywhere (loomc inlines
/// the step into its entry point).
struct TrainInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "loom/Dialect/Train/TrainOps.cpp.inc"
      >();
  addInterfaces<TrainInlinerInterface>();
  attachCallKernelBufferization(*getContext());
  addAttributes<
#define GET_ATTRDEF_LIST
#include "loom/Dialect/Train/TrainAttributes.cpp.inc"
      >();
}

std::pair<StringRef, StringRef>
loom::train::getParamOrStateKey(DictionaryAttr attrs) {
  if (!attrs)
    return {};
  for (StringRef role :
       {TrainDialect::kParamAttrName, TrainDialect::kStateAttrName})
    if (auto name = attrs.getAs<StringAttr>(role))
      return {role, name.getValue()};
  return {};
}

std::optional<unsigned>
loom::train::getLossResultIndex(FunctionOpInterface func) {
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (func.getResultAttr(i, TrainDialect::kLossAttrName))
      return i;
  return std::nullopt;
}

FailureOr<FunctionOpInterface> loom::train::findLossFunction(Operation *module,
                                                             StringRef pass,
                                                             StringRef what) {
  FunctionOpInterface found;
  for (Region &region : module->getRegions())
    for (auto func : region.getOps<FunctionOpInterface>()) {
      if (func.isExternal() || !getLossResultIndex(func))
        continue;
      if (found)
        return func->emitError()
               << pass << ": expected one " << what
               << " (a function with a train.loss result), found @"
               << found.getName() << " and @" << func.getName();
      found = func;
    }
  if (!found)
    return module->emitError()
           << pass << ": expected a " << what
           << " (a function with a train.loss result), found none";
  return found;
}

std::string loom::train::getParamGroup(llvm::StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  std::string group;
  for (StringRef part : parts) {
    group += (group.empty() ? "" : ".") + part.str();
    if (!part.empty() && llvm::all_of(part, llvm::isDigit))
      return group;
  }
  return std::string();
}

/// Returns the function `op` is if role attributes may sit on it, or emits an
/// error naming the attribute.
static FunctionOpInterface getFunctionOrError(Operation *op,
                                              NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    op->emitOpError() << "'" << attr.getName().getValue()
                      << "' is only valid on a function, found it on '"
                      << op->getName() << "'";
  return func;
}

/// Returns true if `attr` is unit or a non-empty string.
static bool isUnitOrName(Attribute attr) {
  if (isa<UnitAttr>(attr))
    return true;
  auto name = dyn_cast<StringAttr>(attr);
  return name && !name.getValue().empty();
}

/// Roles survive bufferisation: a parameter may be a ranked tensor or, after
/// bufferisation, a memref.
static bool isShaped(Type type) {
  return isa<RankedTensorType, MemRefType>(type);
}

static bool isFloatShaped(Type type) {
  return isShaped(type) &&
         isa<FloatType>(cast<ShapedType>(type).getElementType());
}

/// Returns the attribute as a non-empty name, or emits an error.
static StringAttr getNameOrError(Operation *op, NamedAttribute attr,
                                 StringRef where) {
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty()) {
    op->emitOpError() << "expected '" << attr.getName().getValue() << "' on "
                      << where << " to be a non-empty string, got "
                      << attr.getValue();
    return {};
  }
  return name;
}

/// The first role attribute (param, input, state) on the function's
/// arguments: the argument's index and the attribute's name.
static std::optional<std::pair<unsigned, StringAttr>>
getFirstArgRole(FunctionOpInterface func) {
  ArrayAttr all = func.getAllArgAttrs();
  if (!all)
    return std::nullopt;
  for (auto [index, attrs] : llvm::enumerate(all))
    if (auto dict = dyn_cast_or_null<DictionaryAttr>(attrs))
      for (NamedAttribute attr : dict)
        if (llvm::is_contained({TrainDialect::kParamAttrName,
                                TrainDialect::kInputAttrName,
                                TrainDialect::kStateAttrName},
                               attr.getName().getValue()))
          return std::make_pair(unsigned(index), attr.getName());
  return std::nullopt;
}

/// Returns the attribute's value if it is a non-empty name.
static StringAttr getName(DictionaryAttr dict, StringRef attrName) {
  auto name =
      dict ? dyn_cast_or_null<StringAttr>(dict.get(attrName)) : StringAttr();
  return name && !name.getValue().empty() ? name : StringAttr();
}

/// The checks that relate arguments and results, done once per function in
/// one sweep (a check per attribute against every argument would be
/// quadratic, and a training step has thousands): parameter and state names
/// are unique among the arguments, and each result that names an argument
/// (`train.grad`, `train.param`, `train.state`) names one of its type, and
/// no other result of the same role names it.
/// Malformed names are left to the per-attribute checks.
static LogicalResult verifyRoleNames(FunctionOpInterface func) {
  using Key = std::pair<StringRef, StringAttr>;
  DenseMap<Key, unsigned> argumentOf;
  ArrayAttr argAttrs = func.getAllArgAttrs();
  for (unsigned arg = 0, e = argAttrs ? argAttrs.size() : 0; arg < e; ++arg) {
    auto dict = dyn_cast_or_null<DictionaryAttr>(argAttrs[arg]);
    for (StringRef role :
         {TrainDialect::kParamAttrName, TrainDialect::kStateAttrName}) {
      StringAttr name = getName(dict, role);
      if (!name)
        continue;
      auto [it, inserted] = argumentOf.try_emplace(Key{role, name}, arg);
      if (!inserted)
        return func->emitOpError()
               << "duplicate '" << role << "' name " << name
               << " on arguments #" << it->second << " and #" << arg;
    }
  }
  // A result names its argument once: two results updating one parameter
  // would leave which one the trainer keeps to the order of its writes.
  DenseMap<Key, unsigned> resultOf;
  ArrayAttr resultAttrs = func.getAllResultAttrs();
  for (unsigned result = 0, e = resultAttrs ? resultAttrs.size() : 0;
       result < e; ++result) {
    auto dict = dyn_cast_or_null<DictionaryAttr>(resultAttrs[result]);
    for (auto [attrName, role] :
         {std::pair{TrainDialect::kGradAttrName, TrainDialect::kParamAttrName},
          std::pair{TrainDialect::kParamAttrName, TrainDialect::kParamAttrName},
          std::pair{TrainDialect::kStateAttrName,
                    TrainDialect::kStateAttrName}}) {
      StringAttr name = getName(dict, attrName);
      if (!name)
        continue;
      auto [named, fresh] = resultOf.try_emplace(Key{attrName, name}, result);
      if (!fresh)
        return func->emitOpError()
               << "duplicate '" << attrName << "' name " << name
               << " on results #" << named->second << " and #" << result;
      auto it = argumentOf.find(Key{role, name});
      if (it == argumentOf.end())
        return func->emitOpError()
               << "'" << attrName << "' " << name << " on result #" << result
               << " names no argument tagged '" << role << "'";
      Type argType = func.getArgumentTypes()[it->second];
      Type type = func.getResultTypes()[result];
      if (argType != type)
        return func->emitOpError()
               << "expected result #" << result << " ('" << attrName << "' "
               << name << ") to have the type of argument #" << it->second
               << ", " << argType << ", got " << type;
    }
  }
  return success();
}

/// Checks `train.full_shape` on an argument or result of type `type`: a
/// dense i64 array of non-negative sizes that holds at least the local
/// elements (a ZeRO shard holds ceil(E / N) of the E).
static LogicalResult verifyFullShape(Operation *op, NamedAttribute attr,
                                     Type type, StringRef where) {
  auto shape = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
  if (!shape)
    return op->emitOpError()
           << "expected '" << TrainDialect::kFullShapeAttrName << "' on "
           << where << " to be a dense i64 array, got " << attr.getValue();
  int64_t elements = 1;
  for (int64_t size : shape.asArrayRef()) {
    if (size < 0)
      return op->emitOpError()
             << "expected '" << TrainDialect::kFullShapeAttrName << "' on "
             << where << " to have sizes >= 0, got " << attr.getValue();
    if (llvm::MulOverflow(elements, size, elements))
      return op->emitOpError()
             << "'" << TrainDialect::kFullShapeAttrName << "' on " << where
             << " overflows 64 bits of elements: " << attr.getValue();
  }
  auto shaped = dyn_cast<ShapedType>(type);
  if (shaped && shaped.hasStaticShape() &&
      shaped.getNumElements() > std::max<int64_t>(elements, 1))
    return op->emitOpError() << "'" << TrainDialect::kFullShapeAttrName << "' "
                             << attr.getValue() << " on " << where << " holds "
                             << elements << " elements, fewer than its type "
                             << type << " (" << shaped.getNumElements() << ")";
  return success();
}

LogicalResult TrainDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  FunctionOpInterface func = getFunctionOrError(op, attr);
  if (!func)
    return failure();
  StringRef attrName = attr.getName().getValue();
  Type type = func.getArgumentTypes()[argIndex];
  std::string where = "argument #" + std::to_string(argIndex);

  if (attrName == kParamAttrName || attrName == kStateAttrName) {
    StringAttr name = getNameOrError(op, attr, where);
    if (!name)
      return failure();
    StringRef role = attrName == kParamAttrName ? "parameter" : "state";
    if (!isFloatShaped(type))
      return op->emitOpError() << "expected " << role << " " << where
                               << " to be a ranked tensor or memref of "
                                  "floats, got "
                               << type;
    for (StringRef other : {kParamAttrName, kInputAttrName, kStateAttrName})
      if (other != attrName && func.getArgAttr(argIndex, other))
        return op->emitOpError() << where << " cannot be tagged both '"
                                 << attrName << "' and '" << other << "'";
  } else if (attrName == kInputAttrName) {
    if (!isUnitOrName(attr.getValue()))
      return op->emitOpError()
             << "expected '" << kInputAttrName << "' on " << where
             << " to be a unit attribute or a non-empty string, got "
             << attr.getValue();
    if (!isShaped(type))
      return op->emitOpError()
             << "expected input " << where
             << " to be a ranked tensor or memref, got " << type;
  } else if (attrName == kLossAttrName || attrName == kGradAttrName) {
    return op->emitOpError()
           << "'" << attrName << "' tags a result, found it on " << where;
  } else if (attrName == kFullShapeAttrName) {
    return verifyFullShape(op, attr, type, where);
  } else if (attrName == kIdBoundAttrName) {
    auto bound = dyn_cast<IntegerAttr>(attr.getValue());
    if (!bound || !bound.getType().isInteger(64) || bound.getInt() < 1)
      return op->emitOpError() << "expected '" << attrName << "' on " << where
                               << " to be an i64 >= 1, got " << attr.getValue();
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || !isa<IntegerType>(shaped.getElementType()) ||
        !func.getArgAttr(argIndex, kInputAttrName))
      return op->emitOpError()
             << "'" << attrName << "' bounds the ids of an "
             << "input of integers; " << where << " is " << type;
    return success();
  } else {
    return op->emitOpError()
           << "unknown train attribute '" << attrName << "' on " << where;
  }
  // The first role attribute of the function runs the whole-function sweep.
  std::optional<std::pair<unsigned, StringAttr>> first = getFirstArgRole(func);
  if (first && first->first == argIndex && first->second == attr.getName())
    return verifyRoleNames(func);
  return success();
}

/// Checks a result that names an argument (`train.grad`, `train.param` or
/// `train.state` on a result). The name itself is checked here; that an
/// argument of the result's type carries it is checked by verifyRoleNames,
/// which runs from the arguments' first role attribute. Without one, no
/// argument can carry the name.
static LogicalResult verifyResultNamesArgument(FunctionOpInterface func,
                                               NamedAttribute attr,
                                               StringRef argAttrName,
                                               unsigned resultIndex) {
  std::string where = "result #" + std::to_string(resultIndex);
  StringAttr name = getNameOrError(func, attr, where);
  if (!name)
    return failure();
  if (!getFirstArgRole(func))
    return func->emitOpError()
           << "'" << attr.getName().getValue() << "' " << name << " on "
           << where << " names no argument tagged '" << argAttrName << "'";
  return success();
}

LogicalResult TrainDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  FunctionOpInterface func = getFunctionOrError(op, attr);
  if (!func)
    return failure();
  StringRef attrName = attr.getName().getValue();
  if (attrName == kGradAttrName)
    return verifyResultNamesArgument(func, attr, kParamAttrName, resultIndex);
  if (attrName == kParamAttrName || attrName == kStateAttrName)
    return verifyResultNamesArgument(func, attr, attrName, resultIndex);
  if (attrName == kFullShapeAttrName)
    return verifyFullShape(op, attr, func.getResultTypes()[resultIndex],
                           "result #" + std::to_string(resultIndex));
  if (attrName != kLossAttrName)
    return op->emitOpError()
           << "unknown train attribute '" << attrName << "' on result #"
           << resultIndex
           << (attrName == kInputAttrName ? " (it tags arguments)" : "");
  if (!isa<UnitAttr>(attr.getValue()))
    return op->emitOpError()
           << "expected '" << kLossAttrName << "' to be a unit attribute, got "
           << attr.getValue();
  Type type = func.getResultTypes()[resultIndex];
  Type elementType = type;
  if (isShaped(type)) {
    auto shaped = cast<ShapedType>(type);
    elementType = shaped.getRank() == 0 ? shaped.getElementType() : Type();
  }
  if (!elementType || !isa<FloatType>(elementType))
    return op->emitOpError() << "expected the loss (result #" << resultIndex
                             << ") to be a float scalar or a 0-d float "
                                "tensor or memref, got "
                             << type;
  for (unsigned other = 0; other < resultIndex; ++other)
    if (func.getResultAttr(other, kLossAttrName))
      return op->emitOpError() << "expected at most one loss result, found "
                                  "results #"
                               << other << " and #" << resultIndex;
  return success();
}

/// The attribute's value as an i64 in [least, bound), or an error naming it.
static FailureOr<int64_t> getIntegerIn(Operation *op, NamedAttribute attr,
                                       int64_t least, int64_t bound,
                                       StringRef what) {
  auto value = dyn_cast<IntegerAttr>(attr.getValue());
  if (!value || !value.getType().isInteger(64))
    return op->emitOpError()
           << "expected '" << attr.getName().getValue() << "' to be an i64 ("
           << what << "), got " << attr.getValue();
  int64_t n = value.getInt();
  if (n < least || n >= bound)
    return op->emitOpError() << "expected '" << attr.getName().getValue()
                             << "' in [" << least << ", "
                             << (bound == std::numeric_limits<int64_t>::max()
                                     ? std::string("inf")
                                     : std::to_string(bound))
                             << ") (" << what << "), got " << n;
  return n;
}

/// The microbatches of `func`: its pipeline's, else train.microbatches,
/// else nullopt.
static std::optional<int64_t> getMicrobatches(Operation *func) {
  if (!func)
    return std::nullopt;
  if (auto pipeline =
          func->getAttrOfType<PipelineAttr>(TrainDialect::kPipelineAttrName))
    return pipeline.getMicrobatches();
  if (auto count =
          func->getAttrOfType<IntegerAttr>(TrainDialect::kMicrobatchesAttrName))
    return count.getInt();
  return std::nullopt;
}

static constexpr int64_t kNoBound = std::numeric_limits<int64_t>::max();

/// The attributes of a step function: its microbatches, ZeRO stage and
/// pipeline, the optimizer and learning rate, the tied results and the
/// byte figures of the schedule and the plan.
static LogicalResult verifyFunctionAttribute(Operation *op,
                                             NamedAttribute attr) {
  FunctionOpInterface func = getFunctionOrError(op, attr);
  if (!func)
    return failure();
  StringRef name = attr.getName().getValue();
  if (name == TrainDialect::kMicrobatchesAttrName)
    return getIntegerIn(op, attr, 1, kNoBound, "the microbatches");
  if (name == TrainDialect::kZeroStageAttrName)
    return getIntegerIn(op, attr, 1, 4, "the ZeRO stage");
  if (name == TrainDialect::kPipelineAttrName) {
    if (!isa<PipelineAttr>(attr.getValue()))
      return op->emitOpError()
             << "expected '" << name << "' to be a #train.pipeline, got "
             << attr.getValue();
    if (!op->hasAttr(TrainDialect::kPipelineStageAttrName))
      return op->emitOpError()
             << "expected '" << TrainDialect::kPipelineStageAttrName
             << "' beside '" << name << "'";
    return success();
  }
  if (name == TrainDialect::kOptimizerAttrName) {
    auto kind = dyn_cast<StringAttr>(attr.getValue());
    if (kind && llvm::is_contained({"adamw", "sgd"}, kind.getValue()))
      return success();
    return op->emitOpError()
           << "expected '" << name << "' to be \"adamw\" or \"sgd\", got "
           << attr.getValue();
  }
  if (name == TrainDialect::kLearningRateAttrName) {
    auto lr = dyn_cast<FloatAttr>(attr.getValue());
    if (lr && lr.getType().isF64() && std::isfinite(lr.getValueAsDouble()) &&
        lr.getValueAsDouble() >= 0)
      return success();
    return op->emitOpError()
           << "expected '" << name << "' to be a finite f64 >= 0, got "
           << attr.getValue();
  }
  if (name == TrainDialect::kTiedResultsAttrName) {
    auto tied = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!tied || tied.size() != int64_t(func.getNumResults()))
      return op->emitOpError()
             << "expected '" << name << "' to be a dense i64 array of one "
             << "entry per result (" << func.getNumResults() << "), got "
             << attr.getValue();
    for (auto [result, arg] : llvm::enumerate(tied.asArrayRef()))
      if (arg < -1 || arg >= int64_t(func.getNumArguments()))
        return op->emitOpError()
               << "'" << name << "' ties result #" << result << " to argument #"
               << arg << " of " << func.getNumArguments() << " (-1: none)";
    return success();
  }
  return getIntegerIn(op, attr, 0, kNoBound, "bytes");
}

/// train.pipeline_stage: on a stage's function (below its pipeline's
/// stages) or module.
static LogicalResult verifyPipelineStage(Operation *op, NamedAttribute attr) {
  if (!isa<FunctionOpInterface, ModuleOp>(op))
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' is only valid on a function or a module";
  auto pipeline =
      op->getAttrOfType<PipelineAttr>(TrainDialect::kPipelineAttrName);
  return getIntegerIn(op, attr, 0, pipeline ? pipeline.getStages() : kNoBound,
                      pipeline ? "below the pipeline's stages" : "a stage");
}

/// train.footprint: on a train op, one in_place entry per result, each an
/// operand of the result's type or -1.
static LogicalResult verifyFootprint(Operation *op, NamedAttribute attr) {
  auto footprint = dyn_cast<FootprintAttr>(attr.getValue());
  if (!footprint)
    return op->emitOpError()
           << "expected '" << attr.getName().getValue()
           << "' to be a #train.footprint, got " << attr.getValue();
  if (!isa_and_nonnull<TrainDialect>(op->getDialect()))
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' is only valid on a train op";
  ArrayRef<int64_t> inPlace = footprint.getInPlace().asArrayRef();
  if (inPlace.size() != op->getNumResults())
    return op->emitOpError()
           << "'" << attr.getName().getValue() << "' has " << inPlace.size()
           << " in_place entries for " << op->getNumResults() << " results";
  for (auto [result, operand] : llvm::enumerate(inPlace)) {
    if (operand < 0)
      continue;
    if (operand >= int64_t(op->getNumOperands()) ||
        op->getOperand(operand).getType() != op->getResult(result).getType())
      return op->emitOpError()
             << "'" << attr.getName().getValue() << "' writes result #"
             << result << " into operand #" << operand
             << ", which is not an operand of its type";
  }
  return success();
}

/// train.microbatch and train.action: on an op of a function, naming one of
/// its microbatches.
static LogicalResult verifyMicrobatchOfOp(Operation *op, NamedAttribute attr) {
  std::optional<int64_t> count =
      getMicrobatches(op->getParentOfType<FunctionOpInterface>());
  int64_t bound = count.value_or(kNoBound);
  if (attr.getName() == TrainDialect::kMicrobatchAttrName)
    return getIntegerIn(op, attr, 0, bound,
                        count ? "below the function's microbatches"
                              : "a microbatch");
  auto action = dyn_cast<StringAttr>(attr.getValue());
  StringRef text = action ? action.getValue() : StringRef();
  int64_t microbatch;
  if (text.size() < 2 || !StringRef("FBIW").contains(text.front()) ||
      text.drop_front().getAsInteger(10, microbatch) || microbatch < 0)
    return op->emitOpError()
           << "expected '" << attr.getName().getValue()
           << "' to be a schedule action, F, B, I or W and a microbatch "
              "(\"F3\"), got "
           << attr.getValue();
  if (microbatch >= bound)
    return op->emitOpError()
           << "'" << attr.getName().getValue() << "' " << attr.getValue()
           << " names microbatch " << microbatch << " of " << bound;
  return success();
}

/// train.step_manifest: on a module; while its trainer entry (@loom_step)
/// takes memrefs, before lowering, one tensor per memref, of the memref's
/// shape and element type.
static LogicalResult verifyStepManifest(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitOpError() << "'" << name << "' is only valid on a module";
  auto manifest = dyn_cast<StepManifestAttr>(attr.getValue());
  if (!manifest)
    return op->emitOpError()
           << "expected '" << name << "' to be a #train.step_manifest, got "
           << attr.getValue();
  auto entry = dyn_cast_or_null<FunctionOpInterface>(
      SymbolTable::lookupSymbolIn(module, "loom_step"));
  if (!entry ||
      !llvm::all_of(entry.getArgumentTypes(), llvm::IsaPred<MemRefType>))
    return success();
  ArrayRef<Type> buffers = entry.getArgumentTypes();
  ArrayRef<Attribute> tensors = manifest.getTensors().getValue();
  if (buffers.size() != tensors.size())
    return op->emitOpError()
           << "'" << name << "' describes " << tensors.size()
           << " tensors for the " << buffers.size() << " buffers of @loom_step";
  for (auto [index, pair] : llvm::enumerate(llvm::zip(buffers, tensors))) {
    auto memref = dyn_cast<MemRefType>(std::get<0>(pair));
    RankedTensorType type =
        cast<ManifestTensorAttr>(std::get<1>(pair)).getType();
    if (!memref || memref.getShape() != type.getShape() ||
        memref.getElementType() != type.getElementType())
      return op->emitOpError()
             << "'" << name << "' describes buffer #" << index << " as " << type
             << ", but @loom_step takes " << std::get<0>(pair);
  }
  return success();
}

LogicalResult TrainDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  if (attr.getName() == kStepManifestAttrName)
    return verifyStepManifest(op, attr);
  if (attr.getName() == kTargetAttrName) {
    if (!isa<ModuleOp>(op))
      return op->emitOpError()
             << "'" << kTargetAttrName << "' is only valid on a module";
    if (isa<TargetAttr>(attr.getValue()))
      return success();
    return op->emitOpError()
           << "expected '" << kTargetAttrName << "' to be a #train.target, got "
           << attr.getValue();
  }
  if (attr.getName() == kUpdateAttrName) {
    if (isa<UnitAttr>(attr.getValue()))
      return success();
    return op->emitOpError()
           << "expected '" << kUpdateAttrName
           << "' to be a unit attribute, got " << attr.getValue();
  }
  if (attr.getName() == kPipelineStageAttrName)
    return verifyPipelineStage(op, attr);
  if (attr.getName() == kFootprintAttrName)
    return verifyFootprint(op, attr);
  if (llvm::is_contained(
          {kMicrobatchesAttrName, kZeroStageAttrName, kPipelineAttrName,
           kOptimizerAttrName, kLearningRateAttrName, kTiedResultsAttrName,
           kSynchronousPeakBytesAttrName, kScheduledPeakBytesAttrName,
           kTimelinePeakBytesAttrName, kArenaBytesAttrName,
           kArenaBoundBytesAttrName, kPackedBytesAttrName,
           kPackedBoundBytesAttrName},
          attr.getName().getValue()))
    return verifyFunctionAttribute(op, attr);
  if (attr.getName() == kMicrobatchAttrName ||
      attr.getName() == kActionAttrName)
    return verifyMicrobatchOfOp(op, attr);
  return op->emitOpError() << "'" << attr.getName().getValue()
                           << "' is not an operation attribute; train role "
                              "attributes tag function arguments and results";
}
