//===- CollToLoomrt.h - lowering coll to runtime calls --*- C++ -*-===//
//
// The coll ops every lowering to a runtime handles the same way, shared by
// convert-coll-to-loomrt (the trainer's asynchronous runtime) and loom-run's
// simulated world: find the ops, drop releases, turn comm_rank into a call
// and remove comm_world once its users are lowered. Each lowering turns the
// starts and waits into its own calls. declarePrivateFunction also
// declares the runtime functions trainer-profile-probes calls.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_COLLTOLOOMRT_H
#define LOOM_CONVERSION_COLLTOLOOMRT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace loom::coll {

/// The coll ops of a module, by what a lowering does with them.
struct CollOpsToLower {
  llvm::SmallVector<mlir::Operation *> starts, ranks, releases, worlds, groups;
};

/// Collects the module's collective starts, comm_rank, release and
/// comm_world ops, in walk order.
CollOpsToLower collectCollOps(mlir::ModuleOp module);

/// Returns the private function `name` of `type`, declaring it once.
mlir::func::FuncOp declarePrivateFunction(mlir::ModuleOp module,
                                          llvm::StringRef name,
                                          mlir::FunctionType type);

/// After the starts and waits are lowered: replaces each comm_rank by a
/// call to `rankFunction` (() -> i64, declared here) and erases comm_world,
/// which must have no users left.
mlir::LogicalResult lowerRanksAndWorlds(mlir::ModuleOp module,
                                        const CollOpsToLower &ops,
                                        llvm::StringRef rankFunction);

} // namespace loom::coll

#endif // LOOM_CONVERSION_COLLTOLOOMRT_H
