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

/// The communicator `comm` is a group of (through any `coll.comm_group`s):
/// the root every rank shares, whose collectives run on one stream.
mlir::Value getRootComm(mlir::Value comm);

/// One `coll.comm_group` step from the root down to a communicator.
struct GroupStep {
  int64_t size, stride;
};

/// The `coll.comm_group` steps from `comm`'s root (getRootComm) down to
/// `comm`, outermost first; empty for a root.
llvm::SmallVector<GroupStep> getGroupSteps(mlir::Value comm);

} // namespace loom::coll

#endif // LOOM_DIALECT_COLL_COLLOPS_H
