//===- CollTypes.h - coll types ---------------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_COLL_COLLTYPES_H
#define LOOM_DIALECT_COLL_COLLTYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "loom/Dialect/Coll/CollOpsTypes.h.inc"

#endif // LOOM_DIALECT_COLL_COLLTYPES_H
