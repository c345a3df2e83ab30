//===- CollEnums.h - coll enums and attributes ------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_COLL_COLLENUMS_H
#define LOOM_DIALECT_COLL_COLLENUMS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "loom/Dialect/Coll/CollEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Coll/CollAttributes.h.inc"

#endif // LOOM_DIALECT_COLL_COLLENUMS_H
