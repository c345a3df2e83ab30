//===- CollOps.h - coll operations ------------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_COLL_COLLOPS_H
#define LOOM_DIALECT_COLL_COLLOPS_H

#include "loom/Dialect/Coll/CollDialect.h"
#include "loom/Dialect/Coll/CollEnums.h"
#include "loom/Dialect/Coll/CollInterfaces.h"
#include "loom/Dialect/Coll/CollTypes.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "loom/Dialect/Coll/CollOps.h.inc"

namespace loom::coll {

/// The peer and the tag of a send or a receive (`isPointToPoint`).
std::pair<int64_t, int64_t> getPeerAndTag(CollectiveOpInterface op);

} // namespace loom::coll

#endif // LOOM_DIALECT_COLL_COLLOPS_H
