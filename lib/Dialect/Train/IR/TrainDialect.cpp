//===- TrainDialect.cpp - train dialect and its role attributes -----------===//

#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace loom::train;

#include "loom/Dialect/Train/TrainOpsDialect.cpp.inc"

#define GET_OP_CLASSES
#include "loom/Dialect/Train/TrainOps.cpp.inc"

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "loom/Dialect/Train/TrainOps.cpp.inc"
      >();
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

LogicalResult TrainDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  FunctionOpInterface func = getFunctionOrError(op, attr);
  if (!func)
    return failure();
  StringRef attrName = attr.getName().getValue();
  Type type = func.getArgumentTypes()[argIndex];
  auto tensorType = dyn_cast<RankedTensorType>(type);

  if (attrName == kParamAttrName) {
    auto name = dyn_cast<StringAttr>(attr.getValue());
    if (!name || name.getValue().empty())
      return op->emitOpError()
             << "expected '" << kParamAttrName << "' on argument #" << argIndex
             << " to be a non-empty string, got " << attr.getValue();
    if (!tensorType || !isa<FloatType>(tensorType.getElementType()))
      return op->emitOpError()
             << "expected parameter argument #" << argIndex
             << " to be a ranked tensor of floats, got " << type;
    if (func.getArgAttr(argIndex, kInputAttrName))
      return op->emitOpError() << "argument #" << argIndex
                               << " cannot be both a parameter and an input";
    for (unsigned other = 0; other < argIndex; ++other)
      if (func.getArgAttr(other, kParamAttrName) == name)
        return op->emitOpError()
               << "duplicate parameter name " << name << " on arguments #"
               << other << " and #" << argIndex;
    return success();
  }

  if (attrName == kInputAttrName) {
    if (!isUnitOrName(attr.getValue()))
      return op->emitOpError()
             << "expected '" << kInputAttrName << "' on argument #" << argIndex
             << " to be a unit attribute or a non-empty string, got "
             << attr.getValue();
    if (!tensorType)
      return op->emitOpError() << "expected input argument #" << argIndex
                               << " to be a ranked tensor, got " << type;
    return success();
  }

  if (attrName == kLossAttrName)
    return op->emitOpError()
           << "'" << kLossAttrName << "' tags a result, found it on argument #"
           << argIndex;
  return op->emitOpError() << "unknown train attribute '" << attrName
                           << "' on argument #" << argIndex;
}

LogicalResult TrainDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  FunctionOpInterface func = getFunctionOrError(op, attr);
  if (!func)
    return failure();
  StringRef attrName = attr.getName().getValue();
  if (attrName != kLossAttrName)
    return op->emitOpError()
           << "unknown train attribute '" << attrName << "' on result #"
           << resultIndex
           << (attrName == kParamAttrName || attrName == kInputAttrName
                   ? " (it tags arguments)"
                   : "");
  if (!isa<UnitAttr>(attr.getValue()))
    return op->emitOpError()
           << "expected '" << kLossAttrName << "' to be a unit attribute, got "
           << attr.getValue();
  Type type = func.getResultTypes()[resultIndex];
  Type elementType = type;
  if (auto tensorType = dyn_cast<RankedTensorType>(type))
    elementType =
        tensorType.getRank() == 0 ? tensorType.getElementType() : Type();
  if (!elementType || !isa<FloatType>(elementType))
    return op->emitOpError() << "expected the loss (result #" << resultIndex
                             << ") to be a float scalar or 0-d float tensor, "
                                "got "
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
  return op->emitOpError() << "'" << attr.getName().getValue()
                           << "' is not an operation attribute; train role "
                              "attributes tag function arguments and results";
}
