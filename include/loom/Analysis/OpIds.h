//===- OpIds.h - stable op ids, carried in locations ------------*- C++ -*-===//
//
// trainer-stamp-op-ids numbers the step's ops once, before scheduling, by
// wrapping each op's location in a name: loc("loom.op.17"(original)). A
// profile (trainer --profile) is keyed by these ids, so it outlives any
// reordering, and a location survives what an attribute would not:
// bufferisation, decomposition into runtime calls, lowering to loops and
// kernels (whose ops take their source op's location), and fusion (a
// FusedLoc holds every fused op's id).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_OPIDS_H
#define LOOM_ANALYSIS_OPIDS_H

#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>

namespace loom {

/// The name an op id's location carries: "loom.op.<id>".
inline constexpr llvm::StringLiteral kOpIdPrefix = "loom.op.";

/// `loc` with its op id (if any) replaced by `id`.
mlir::Location withOpId(mlir::Location loc, int64_t id);

/// Every op id in `loc`, in the order they appear, without repeats (a fused
/// location holds several; a call site's callee part is searched too).
llvm::SmallVector<int64_t> getOpIds(mlir::Location loc);

/// The op's id when its location holds exactly one.
std::optional<int64_t> getOpId(mlir::Operation *op);

/// The name a pipeline schedule's action carries in a location:
/// "loom.action.<action>", e.g. loc("loom.action.F3"(original)). pp-partition
/// wraps each op of a stage in its action's name, so that the action is
/// still known after bufferisation and lowering (codegen-outline-actions).
inline constexpr llvm::StringLiteral kActionPrefix = "loom.action.";

/// `loc` wrapped in `action`'s name.
mlir::Location withAction(mlir::Location loc, llvm::StringRef action);

/// The first action named in `loc`, or "" when it names none.
llvm::StringRef getAction(mlir::Location loc);

} // namespace loom

#endif // LOOM_ANALYSIS_OPIDS_H
