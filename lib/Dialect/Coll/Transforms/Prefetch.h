//===- Prefetch.h - move all-gather starts earlier within a limit -*- C++ -*-===//
//
// Shared by coll-prefetch and coll-overlap-schedule.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_DIALECT_COLL_TRANSFORMS_PREFETCH_H
#define LOOM_LIB_DIALECT_COLL_TRANSFORMS_PREFETCH_H

#include "mlir/IR/Block.h"

namespace loom::coll {

/// Moves each all-gather start of `block` up, by at most `distance` ops, but
/// not above its operands' definitions or the previous collective on its
/// communicator, and only while every op it passes stays at or under
/// `limitBytes` live. Returns true if anything moved.
bool prefetchAllGathers(mlir::Block &block, unsigned distance,
                        int64_t limitBytes);

} // namespace loom::coll

#endif // LOOM_LIB_DIALECT_COLL_TRANSFORMS_PREFETCH_H
