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
#include "mlir/Transforms/DialectConversion.h"

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

/// The rank in `comm` (a coll.comm_group chain down from the world) from
/// the world's `rank` (i64): floor(r / stride) mod size per group.
mlir::Value getGroupRank(mlir::OpBuilder &builder, mlir::Location loc,
                         mlir::Value rank, mlir::Value comm);

/// After the starts and waits are lowered: replaces each comm_rank by a
/// call to `rankFunction` (() -> i64, declared here) and erases comm_world,
/// which must have no users left.
mlir::LogicalResult lowerRanksAndWorlds(mlir::ModuleOp module,
                                        const CollOpsToLower &ops,
                                        llvm::StringRef rankFunction);

/// coll's types in the runtime's terms: `!coll.comm<N>` is an i64 handle
/// (LOOMRT_COMM_WORLD or loomrt_comm_group's), `!coll.future<tensor<S x T>>`
/// the start's i64 handle and its output `memref<S x T>`.
class CollToLoomrtTypeConverter : public mlir::TypeConverter {
public:
  explicit CollToLoomrtTypeConverter(mlir::MLIRContext *context);
};

/// convert-coll-to-loomrt's patterns: starts to loomrt_coll_start, waits to
/// loomrt_coll_wait and a to_tensor of the output, comm_world to its
/// handle, comm_group to loomrt_comm_group, comm_rank to loomrt_rank and
/// arithmetic, release to nothing. The starts must be lowerable (f32, f64
/// or bf16, axis 0, static shapes, waited).
void populateCollToLoomrtPatterns(mlir::TypeConverter &converter,
                                  mlir::RewritePatternSet &patterns);

} // namespace loom::coll

#endif // LOOM_CONVERSION_COLLTOLOOMRT_H
