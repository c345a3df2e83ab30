//===- TrainDialect.cpp - train dialect and its role attributes -----------===//

#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom::train;

#include "loom/Dialect/Train/TrainOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Train/TrainAttributes.cpp.inc"

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "loom/Dialect/Train/TrainOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "loom/Dialect/Train/TrainAttributes.cpp.inc"
      >();
}

std::optional<unsigned>
loom::train::getLossResultIndex(FunctionOpInterface func) {
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (func.getResultAttr(i, TrainDialect::kLossAttrName))
      return i;
  return std::nullopt;
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

/// Checks that `name` is unique among the `attrName` tags of the arguments
/// before `argIndex`.
static LogicalResult verifyUniqueArgName(FunctionOpInterface func,
                                         StringRef attrName, StringAttr name,
                                         unsigned argIndex) {
  for (unsigned other = 0; other < argIndex; ++other)
    if (func.getArgAttr(other, attrName) == name)
      return func->emitOpError()
             << "duplicate '" << attrName << "' name " << name
             << " on arguments #" << other << " and #" << argIndex;
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
    return verifyUniqueArgName(func, attrName, name, argIndex);
  }

  if (attrName == kInputAttrName) {
    if (!isUnitOrName(attr.getValue()))
      return op->emitOpError()
             << "expected '" << kInputAttrName << "' on " << where
             << " to be a unit attribute or a non-empty string, got "
             << attr.getValue();
    if (!isShaped(type))
      return op->emitOpError()
             << "expected input " << where
             << " to be a ranked tensor or memref, got " << type;
    return success();
  }

  if (attrName == kLossAttrName || attrName == kGradAttrName)
    return op->emitOpError()
           << "'" << attrName << "' tags a result, found it on " << where;
  return op->emitOpError() << "unknown train attribute '" << attrName << "' on "
                           << where;
}

/// Checks a result that names an argument (`train.grad`, `train.param` or
/// `train.state` on a result): the argument exists and has the result's type.
static LogicalResult verifyResultNamesArgument(FunctionOpInterface func,
                                               NamedAttribute attr,
                                               StringRef argAttrName,
                                               unsigned resultIndex) {
  std::string where = "result #" + std::to_string(resultIndex);
  StringAttr name = getNameOrError(func, attr, where);
  if (!name)
    return failure();
  Type type = func.getResultTypes()[resultIndex];
  for (unsigned arg = 0, e = func.getNumArguments(); arg < e; ++arg) {
    if (func.getArgAttr(arg, argAttrName) != name)
      continue;
    if (func.getArgumentTypes()[arg] != type)
      return func->emitOpError()
             << "expected " << where << " ('" << attr.getName().getValue()
             << "' " << name << ") to have the type of argument #" << arg
             << ", " << func.getArgumentTypes()[arg] << ", got " << type;
    return success();
  }
  return func->emitOpError()
         << "'" << attr.getName().getValue() << "' " << name << " on " << where
         << " names no argument tagged '" << argAttrName << "'";
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

LogicalResult TrainDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  if (attr.getName() == kUpdateAttrName) {
    if (isa<UnitAttr>(attr.getValue()))
      return success();
    return op->emitOpError()
           << "expected '" << kUpdateAttrName
           << "' to be a unit attribute, got " << attr.getValue();
  }
  return op->emitOpError() << "'" << attr.getName().getValue()
                           << "' is not an operation attribute; train role "
                              "attributes tag function arguments and results";
}
