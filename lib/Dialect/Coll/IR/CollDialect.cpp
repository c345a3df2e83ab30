//===- CollDialect.cpp - coll dialect, types and attributes ---------------===//

#include "loom/Dialect/Coll/CollDialect.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom::coll;

#include "loom/Dialect/Coll/CollEnums.cpp.inc"
#include "loom/Dialect/Coll/CollOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Coll/CollAttributes.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "loom/Dialect/Coll/CollOpsTypes.cpp.inc"

void CollDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "loom/Dialect/Coll/CollOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "loom/Dialect/Coll/CollOpsTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "loom/Dialect/Coll/CollAttributes.cpp.inc"
      >();
}

Operation *CollDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

//===----------------------------------------------------------------------===//
// CommType
//===----------------------------------------------------------------------===//

/// Parses `<N>` or `<?>`.
Type CommType::parse(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t size = ShapedType::kDynamic;
  if (parser.parseLess())
    return {};
  if (failed(parser.parseOptionalQuestion()) && parser.parseInteger(size))
    return {};
  if (parser.parseGreater())
    return {};
  return parser.getChecked<CommType>(loc, parser.getContext(), size);
}

void CommType::print(AsmPrinter &printer) const {
  printer << '<';
  if (hasStaticSize())
    printer << getSize();
  else
    printer << '?';
  printer << '>';
}

LogicalResult CommType::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t size) {
  if (!ShapedType::isDynamic(size) && size <= 0)
    return emitError() << "expected a positive number of ranks, got " << size;
  return success();
}
