//===- CollDialect.h - coll dialect -----------------------------*- C++ -*-===//
//
// The `coll` dialect: communicators, asynchronous collectives and their waits.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_COLL_COLLDIALECT_H
#define LOOM_DIALECT_COLL_COLLDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "loom/Dialect/Coll/CollOpsDialect.h.inc"

namespace loom::coll {

/// The in-order communication stream of a communicator. Every start and wait
/// reads and writes it, so generic passes keep their number and order.
struct CommunicationResource
    : public mlir::SideEffects::Resource::Base<CommunicationResource> {
  llvm::StringRef getName() final { return "<coll.comm>"; }
};

/// The memory collectives allocate for their results.
struct CollectiveBufferResource
    : public mlir::SideEffects::Resource::Base<CollectiveBufferResource> {
  llvm::StringRef getName() final { return "<coll.buffer>"; }
};

} // namespace loom::coll

#endif // LOOM_DIALECT_COLL_COLLDIALECT_H
