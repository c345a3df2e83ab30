//===- ReverseMode.cpp - reverse-mode differentiation engine --------------===//

#include "ReverseMode.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace loom;
using namespace loom::train;

void ReverseMode::markActive(ValueRange values) {
  for (Value value : values)
    active.insert(value);
}

void ReverseMode::propagateActivity(ArrayRef<Operation *> ops) {
  for (Operation *op : ops) {
    bool anyActive =
        llvm::any_of(op->getOperands(), [&](Value v) { return isActive(v); });
    if (!anyActive && op->getNumRegions() != 0) {
      // Values a body reads from above (e.g. a gather's table) count too.
      llvm::SetVector<Value> captured;
      getUsedValuesDefinedAbove(op->getRegions(), captured);
      anyActive = llvm::any_of(captured, [&](Value v) { return isActive(v); });
    }
    if (anyActive)
      markActive(op->getResults());
  }
}

void ReverseMode::accumulate(Value value, Value contribution) {
  if (!isActive(value))
    return;
  Value &slot = adjoints[value];
  if (!slot) {
    slot = contribution;
    return;
  }
  Location loc = contribution.getLoc();
  if (isa<FloatType>(value.getType())) {
    slot = arith::AddFOp::create(builder, loc, slot, contribution);
    return;
  }
  LinalgBuilder lb(builder, loc);
  auto type = cast<RankedTensorType>(value.getType());
  unsigned rank = type.getRank();
  slot = lb.generic(lb.empty(type.getShape(), type.getElementType()),
                    {slot, contribution},
                    {lb.identity(rank), lb.identity(rank), lb.identity(rank)},
                    [](OpBuilder &b, Location l, ValueRange args) -> Value {
                      return arith::AddFOp::create(b, l, args[0], args[1]);
                    });
}

Value ReverseMode::getAdjointOrZero(Value value) {
  if (Value adjoint = getAdjoint(value))
    return adjoint;
  Location loc = value.getLoc();
  if (isa<FloatType>(value.getType()))
    return arith::ConstantOp::create(
        builder, loc, builder.getFloatAttr(value.getType(), 0.0));
  auto type = cast<RankedTensorType>(value.getType());
  return linalg(loc).filled(type.getShape(), type.getElementType(), 0.0);
}

LogicalResult ReverseMode::differentiate(ArrayRef<Operation *> ops) {
  for (Operation *op : llvm::reverse(ops)) {
    if (llvm::none_of(op->getResults(), [&](Value r) { return getAdjoint(r); }))
      continue;
    if (failed(differentiateOp(op)))
      return failure();
  }
  return success();
}

LogicalResult ReverseMode::differentiateOp(Operation *op) {
  if (isTrainDifferentiable(op))
    return differentiateTrainOp(*this, op);
  if (isLinalgDifferentiable(op))
    return differentiateLinalgOp(*this, op);
  if (isTensorDifferentiable(op))
    return differentiateTensorOp(*this, op);
  return op->emitOpError("has no derivative rule in train-autodiff");
}
