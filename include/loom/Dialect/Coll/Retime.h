//===- Retime.h - moves of collective starts and waits ----------*- C++ -*-===//
//
// Shared by coll-prefetch, coll-overlap-schedule and coll-reorder-baseline.
// Every move keeps compute in its order and each op after its operands.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_COLL_RETIME_H
#define LOOM_DIALECT_COLL_RETIME_H

#include "loom/Analysis/CostModel.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "mlir/IR/Block.h"

namespace loom::coll {

/// The block's ops, in order.
llvm::SmallVector<mlir::Operation *> getBlockOrder(mlir::Block &block);
/// Reorders `block` to `order` (all its ops, terminator last).
void setBlockOrder(mlir::Block &block, llvm::ArrayRef<mlir::Operation *> order);

/// The last op of the block that defines one of `op`'s operands, or null.
mlir::Operation *getLastOperandDef(mlir::Operation *op);

/// Moves `wait` down to just before the first op that uses its result (the
/// terminator if none).
void sinkWait(WaitOp wait);

/// The synchronous order, the memory-minimal one reordering collectives
/// reaches: each all-gather and broadcast starts right before the first use
/// of its result, each reduce-scatter and all-reduce right after its input
/// exists, and every wait follows its start directly. Sends and receives
/// stay where they are (receives are matched in the order they are posted). On
/// `zero-partition`'s output this only moves each wait up to its start.
void synchronize(mlir::Block &block);

/// Moves each start of collective `kind` in `block` up, by at most
/// `distance` ops, but not above its operands' definitions or the previous
/// collective on its communicator, and only while every op it passes stays
/// at or under `limitBytes` live (the result is live from the start). With
/// `overtake`, it may pass collectives of other kinds except broadcasts.
/// Returns true if anything moved.
bool hoistStarts(mlir::Block &block, CollectiveKind kind, unsigned distance,
                 int64_t limitBytes, bool overtake);

/// Moves all-gather starts up (hoistStarts) with overtaking, and keeps that
/// order only if its simulated makespan on `model` is shorter than the
/// order-keeping prefetch's; otherwise the order-keeping one stands.
/// Overtaking delays the overtaken collectives, which can stall their waits.
void prefetchAllGathersWhereFaster(mlir::Block &block, unsigned distance,
                                   int64_t limitBytes, const CostModel &model);

} // namespace loom::coll

#endif // LOOM_DIALECT_COLL_RETIME_H
