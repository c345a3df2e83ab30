//===- ReverseMode.h - reverse-mode differentiation engine ------*- C++ -*-===//
//
// The engine behind train-autodiff. It walks a list of tensor-level ops in
// reverse, keeps one adjoint per value (contributions accumulate), and emits
// the adjoint computation at the builder's insertion point. Per-op rules live
// in LinalgAdjoints.cpp, TensorAdjoints.cpp and TrainOpAdjoints.cpp; scalar
// rules for linalg bodies in ScalarAdjoints.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_AUTODIFF_REVERSEMODE_H
#define LOOM_AUTODIFF_REVERSEMODE_H

#include "loom/Utils/LinalgBuilder.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace loom::autodiff {

class ReverseMode {
public:
  explicit ReverseMode(mlir::OpBuilder &builder) : builder(builder) {}

  /// Marks `values` active (they depend on what is differentiated) and
  /// propagates activity forward through `ops`, in order.
  void markActive(mlir::ValueRange values);
  void propagateActivity(llvm::ArrayRef<mlir::Operation *> ops);
  bool isActive(mlir::Value value) const { return active.contains(value); }

  /// Adds `contribution` to the adjoint of `value` (only if it is active).
  void accumulate(mlir::Value value, mlir::Value contribution);
  /// The adjoint of `value`, or null if nothing reached it.
  mlir::Value getAdjoint(mlir::Value value) const {
    return adjoints.lookup(value);
  }
  /// The adjoint of `value`, or zeros of its type if nothing reached it.
  mlir::Value getAdjointOrZero(mlir::Value value);

  /// Propagates adjoints backwards through `ops` (given in program order).
  mlir::LogicalResult differentiate(llvm::ArrayRef<mlir::Operation *> ops);

  mlir::OpBuilder &getBuilder() { return builder; }
  LinalgBuilder linalg(mlir::Location loc) {
    return LinalgBuilder(builder, loc);
  }

private:
  mlir::LogicalResult differentiateOp(mlir::Operation *op);

  mlir::OpBuilder &builder;
  llvm::DenseSet<mlir::Value> active;
  llvm::DenseMap<mlir::Value, mlir::Value> adjoints;
};

/// Per-op rules. Each reads the adjoints of `op`'s results from `rm` and
/// accumulates into its active operands. They return failure after emitting
/// a diagnostic on `op`.
mlir::LogicalResult differentiateLinalgOp(ReverseMode &rm, mlir::Operation *op);
mlir::LogicalResult differentiateTensorOp(ReverseMode &rm, mlir::Operation *op);
mlir::LogicalResult differentiateTrainOp(ReverseMode &rm, mlir::Operation *op);

/// Whether two slices of the same tensor, both with static offsets and
/// sizes and unit strides, share no element.
bool disjointSlices(mlir::OffsetSizeAndStrideOpInterface a,
                    mlir::OffsetSizeAndStrideOpInterface b);

/// Returns true if there is a rule for `op` (linalg, tensor or train).
bool isLinalgDifferentiable(mlir::Operation *op);
bool isTensorDifferentiable(mlir::Operation *op);
bool isTrainDifferentiable(mlir::Operation *op);

/// Emits, at `builder`'s insertion point inside a linalg body, the derivative
/// of `result` (a scalar computed from the body's block arguments through
/// the ops cloned under `mapping`) with respect to `wrt`, times `seed`.
/// Returns null after emitting a diagnostic on the op that has no rule.
mlir::Value differentiateScalar(mlir::OpBuilder &builder, mlir::Location loc,
                                mlir::Value result, mlir::Value seed,
                                mlir::Value wrt);

} // namespace loom::autodiff

#endif // LOOM_AUTODIFF_REVERSEMODE_H
