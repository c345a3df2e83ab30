//===- ReverseMode.cpp - reverse-mode differentiation engine --------------===//

#include "ReverseMode.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace loom;
using namespace loom::autodiff;

void ReverseMode::markActive(ValueRange values) {
  // Only floats carry a derivative: a comparison's i1 mask or an integer
  // computed from a parameter is as constant to the loss as an input.
  for (Value value : values)
    if (isa<FloatType>(getElementTypeOrSelf(value.getType())))
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

bool loom::autodiff::disjointSlices(OffsetSizeAndStrideOpInterface a,
                                    OffsetSizeAndStrideOpInterface b) {
  auto isStatic = [](OffsetSizeAndStrideOpInterface s) {
    return !ShapedType::isDynamicShape(s.getStaticOffsets()) &&
           !ShapedType::isDynamicShape(s.getStaticSizes()) &&
           llvm::all_of(s.getStaticStrides(),
                        [](int64_t stride) { return stride == 1; });
  };
  if (!isStatic(a) || !isStatic(b) ||
      a.getStaticOffsets().size() != b.getStaticOffsets().size())
    return false;
  for (auto [ao, as, bo, bs] :
       llvm::zip(a.getStaticOffsets(), a.getStaticSizes(), b.getStaticOffsets(),
                 b.getStaticSizes()))
    if (ao + as <= bo || bo + bs <= ao)
      return true;
  return false;
}

/// The chain of insert_slices `value` is, innermost first, if it ends in a
/// fill of zero into a tensor.empty (an adjoint padded by a slice's rule);
/// empty otherwise.
static SmallVector<tensor::InsertSliceOp> paddedChain(Value value,
                                                      linalg::FillOp &root) {
  SmallVector<tensor::InsertSliceOp> chain;
  while (auto insert = value.getDefiningOp<tensor::InsertSliceOp>()) {
    chain.push_back(insert);
    value = insert.getDest();
  }
  root = value.getDefiningOp<linalg::FillOp>();
  if (!root || !root.hasPureTensorSemantics() ||
      !root.getOutputs()[0].getDefiningOp<tensor::EmptyOp>() ||
      !matchPattern(root.getInputs()[0], m_AnyZeroFloat()))
    chain.clear();
  std::reverse(chain.begin(), chain.end());
  return chain;
}

/// `contribution` added to `slot` without arithmetic when both are zeros
/// but for slices that do not overlap (the gradients of a tensor's halves,
/// as RoPE splits it): the contribution's slice is inserted into `slot`.
/// Zeros the slices cover whole are never filled. Null if not so.
static Value mergePadded(OpBuilder &builder, Value slot, Value contribution) {
  linalg::FillOp root, unused;
  SmallVector<tensor::InsertSliceOp> chain = paddedChain(slot, root);
  SmallVector<tensor::InsertSliceOp> added = paddedChain(contribution, unused);
  if (chain.empty() || added.size() != 1 ||
      slot.getType() != contribution.getType())
    return {};
  tensor::InsertSliceOp insert = added.front();
  chain.push_back(insert);
  for (auto [i, a] : llvm::enumerate(chain))
    for (tensor::InsertSliceOp b : ArrayRef(chain).drop_front(i + 1))
      if (!disjointSlices(a, b))
        return {};
  chain.pop_back();
  auto merged = tensor::InsertSliceOp::create(
      builder, insert.getLoc(), insert.getSource(), slot,
      insert.getMixedOffsets(), insert.getMixedSizes(),
      insert.getMixedStrides());
  // Disjoint slices as large as the whole cover it: the zeros are dead,
  // unless something reads the chain before its last insertion.
  auto type = cast<RankedTensorType>(slot.getType());
  int64_t covered = merged.getSourceType().getNumElements();
  bool unshared = root->hasOneUse();
  for (tensor::InsertSliceOp earlier : chain) {
    covered += earlier.getSourceType().getNumElements();
    unshared &= earlier->hasOneUse();
  }
  if (type.hasStaticShape() && covered == type.getNumElements() && unshared)
    chain.front().getDestMutable().assign(root.getOutputs()[0]);
  return merged;
}

void ReverseMode::accumulate(Value value, Value contribution) {
  if (!isActive(value))
    return;
  Value &slot = adjoints[value];
  if (!slot) {
    slot = contribution;
    return;
  }
  if (Value merged = mergePadded(builder, slot, contribution)) {
    slot = merged;
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
    Block *block = builder.getInsertionBlock();
    Block::iterator end = builder.getInsertionPoint();
    Operation *before = end == block->begin() ? nullptr : &*std::prev(end);
    if (failed(differentiateOp(op)))
      return failure();
    // The adjoint's ops are the forward op's: its location (diagnostics,
    // and what pp-partition places them by) and its microbatch.
    auto microbatch =
        op->getAttr(loom::train::TrainDialect::kMicrobatchAttrName);
    for (auto it = before ? std::next(before->getIterator()) : block->begin();
         it != builder.getInsertionPoint(); ++it) {
      it->setLoc(op->getLoc());
      if (microbatch)
        it->setAttr(loom::train::TrainDialect::kMicrobatchAttrName, microbatch);
    }
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
