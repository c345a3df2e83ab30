//===- TrainMicrobatch.cpp - train-microbatch -----------------------------===//
//
// Splits a forward's batch into microbatches: every op that carries the
// batch is cloned once per microbatch at 1/M of the batch, and the loss
// becomes the sum of the microbatches' token losses over the whole batch's
// count of valid tokens. Differentiating the result gives each
// microbatch's backward and accumulates the gradients; pp-partition then
// orders the microbatches' forwards and backwards by a pipeline schedule.
//
// Which dimension of each value carries the batch is found by propagation
// from the `train.input` arguments' dimension 0: through linalg ops' loop
// dimensions (both ways, so `tensor.empty` and `linalg.fill` inits are
// found from their users), reshapes (the batch is the outermost dimension
// of an expanded group), element-wise ops and the train ops' own rules.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "loom/Utils/LinalgBodies.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

namespace loom::train {
#define GEN_PASS_DEF_TRAINMICROBATCHPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

/// Which dimensions of each tensor value scale with the batch.
class BatchDims {
public:
  /// Marks `dim` of `value`; true if it was not marked.
  bool mark(Value value, int64_t dim) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type || dim >= type.getRank())
      return false;
    SmallVector<bool> &dims = scaled[value];
    dims.resize(type.getRank(), false);
    if (dims[dim])
      return false;
    dims[dim] = true;
    return true;
  }
  bool isMarked(Value value, int64_t dim) const {
    auto it = scaled.find(value);
    return it != scaled.end() && dim < int64_t(it->second.size()) &&
           it->second[dim];
  }
  bool hasAny(Value value) const {
    auto it = scaled.find(value);
    return it != scaled.end() && llvm::is_contained(it->second, true);
  }
  /// Marks both if either is marked.
  bool tie(Value a, int64_t da, Value b, int64_t db) {
    if (isMarked(a, da))
      return mark(b, db);
    if (isMarked(b, db))
      return mark(a, da);
    return false;
  }
  /// The marked dimensions of `value`.
  SmallVector<int64_t> getDims(Value value) const {
    SmallVector<int64_t> dims;
    auto it = scaled.find(value);
    if (it != scaled.end())
      for (auto [d, marked] : llvm::enumerate(it->second))
        if (marked)
          dims.push_back(d);
    return dims;
  }

private:
  DenseMap<Value, SmallVector<bool>> scaled;
};

/// How a reshape carries the batch: along each group, the large side's
/// outermost dimension is the batch iff the small side's dimension is.
bool propagateReshape(BatchDims &dims, Value small, Value large,
                      ArrayRef<ReassociationIndices> groups) {
  bool changed = false;
  for (auto [smallDim, group] : llvm::enumerate(groups)) {
    bool anyLarge =
        llvm::any_of(group, [&](int64_t d) { return dims.isMarked(large, d); });
    if (anyLarge)
      changed |= dims.mark(small, smallDim);
    else if (dims.isMarked(small, smallDim))
      changed |= dims.mark(large, group.front());
  }
  return changed;
}

/// Applies `op`'s rule once; true if anything changed. Sets `known` to
/// false for an op without a rule.
bool propagate(BatchDims &dims, Operation *op, bool &known) {
  known = true;
  bool changed = false;
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    SmallVector<AffineMap> maps = linalgOp.getIndexingMapsArray();
    // (value, dim) pairs per loop dimension; results share their init's map.
    SmallVector<SmallVector<std::pair<Value, int64_t>>> perLoop(
        linalgOp.getNumLoops());
    auto collect = [&](Value value, AffineMap map) {
      for (auto [d, expr] : llvm::enumerate(map.getResults()))
        if (auto dimExpr = dyn_cast<AffineDimExpr>(expr))
          perLoop[dimExpr.getPosition()].push_back({value, int64_t(d)});
    };
    for (OpOperand &operand : op->getOpOperands())
      collect(operand.get(), maps[operand.getOperandNumber()]);
    for (OpResult result : op->getResults())
      collect(result,
              maps[linalgOp.getNumDpsInputs() + result.getResultNumber()]);
    for (auto &members : perLoop) {
      bool any = llvm::any_of(
          members, [&](auto &m) { return dims.isMarked(m.first, m.second); });
      if (any)
        for (auto &[value, d] : members)
          changed |= dims.mark(value, d);
    }
    return changed;
  }
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
    return propagateReshape(dims, collapse.getResult(), collapse.getSrc(),
                            collapse.getReassociationIndices());
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
    return propagateReshape(dims, expand.getSrc(), expand.getResult(),
                            expand.getReassociationIndices());
  auto tieAll = [&](Value a, Value b) {
    auto type = cast<RankedTensorType>(a.getType());
    for (int64_t d = 0; d < type.getRank(); ++d)
      changed |= dims.tie(a, d, b, d);
  };
  // A slice carries the batch along the dimensions it takes whole; one that
  // narrows the batch has no rule (its microbatch clones would need other
  // offsets).
  auto tieWhole = [&](Value whole, Value part,
                      OffsetSizeAndStrideOpInterface slice) {
    auto type = cast<RankedTensorType>(whole.getType());
    if (slice.getMixedSizes().size() != size_t(type.getRank()) ||
        cast<RankedTensorType>(part.getType()).getRank() != type.getRank()) {
      known = !dims.hasAny(whole) && !dims.hasAny(part);
      return;
    }
    for (int64_t d = 0; d < type.getRank(); ++d) {
      bool takesWhole = !slice.isDynamicOffset(d) &&
                        slice.getStaticOffset(d) == 0 &&
                        !slice.isDynamicSize(d) &&
                        slice.getStaticSize(d) == type.getDimSize(d) &&
                        !slice.isDynamicStride(d) &&
                        slice.getStaticStride(d) == 1;
      if (takesWhole)
        changed |= dims.tie(whole, d, part, d);
      else if (dims.isMarked(whole, d) || dims.isMarked(part, d))
        known = false;
    }
  };
  if (auto extract = dyn_cast<tensor::ExtractSliceOp>(op)) {
    tieWhole(extract.getSource(), extract.getResult(), extract);
    return changed;
  }
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
    tieAll(insert.getDest(), insert.getResult());
    tieWhole(insert.getDest(), insert.getSource(), insert);
    return changed;
  }
  if (auto concat = dyn_cast<tensor::ConcatOp>(op)) {
    int64_t axis = concat.getDim();
    for (Value input : concat.getInputs())
      for (int64_t d = 0; d < concat.getResultType().getRank(); ++d)
        if (d != axis)
          changed |= dims.tie(input, d, concat.getResult(), d);
    for (Value v : llvm::concat<Value>(concat.getInputs(),
                                       concat->getResults()))
      if (dims.isMarked(v, axis))
        known = false;
    return changed;
  }
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    for (int64_t d = 0; d < embedding.getIds().getType().getRank(); ++d)
      changed |= dims.tie(embedding.getIds(), d, embedding.getResult(), d);
    return changed;
  }
  if (auto norm = dyn_cast<RMSNormOp>(op)) {
    tieAll(norm.getInput(), norm.getResult());
    return changed;
  }
  if (auto rope = dyn_cast<RoPEOp>(op)) {
    tieAll(rope.getInput(), rope.getResult());
    return changed;
  }
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    for (Value v : {attention.getQuery(), attention.getKey(),
                    attention.getValue(), attention.getResult()})
      changed |= dims.tie(attention.getQuery(), 0, v, 0);
    return changed;
  }
  if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
    changed |= dims.tie(loss.getLogits(), 0, loss.getLabels(), 0);
    return changed;
  }
  if (auto loss = dyn_cast<LinearCrossEntropyOp>(op)) {
    for (Value v : {loss.getLabels(), loss.getLse()})
      changed |= dims.tie(loss.getHidden(), 0, v, 0);
    return changed;
  }
  if (op->hasTrait<OpTrait::SameOperandsAndResultShape>() ||
      op->hasTrait<OpTrait::Elementwise>()) {
    SmallVector<Value> tensors;
    for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
      if (isa<RankedTensorType>(v.getType()))
        tensors.push_back(v);
    for (Value v : tensors)
      if (cast<RankedTensorType>(v.getType()).getRank() ==
          cast<RankedTensorType>(tensors.front().getType()).getRank())
        tieAll(tensors.front(), v);
    return changed;
  }
  // Sources (tensor.empty, constants) take their users' batch dimensions.
  if (llvm::none_of(op->getOperandTypes(),
                    [](Type t) { return isa<ShapedType>(t); }))
    return false;
  known = op->getNumResults() == 0 ||
          llvm::none_of(op->getResultTypes(),
                        [](Type t) { return isa<ShapedType>(t); });
  return false;
}

/// A loss that is a function of one sum over the batch (a mean squared
/// error: an additive reduction of every element to a 0-d tensor, then
/// scalar ops): the reduction, with the ops from it to the loss in `tail`.
/// The reduction can be taken per microbatch and the tail run once on the
/// microbatches' total, whatever the tail computes. Null otherwise.
linalg::GenericOp findSummedLoss(Value loss, Block &body,
                                 SmallVectorImpl<Operation *> &tail) {
  auto isScalar = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return !type || type.getRank() == 0;
  };
  // Walk back through ops on 0-d tensors to the one that reduces to them.
  SmallVector<Operation *> worklist;
  SetVector<Operation *> seen;
  linalg::GenericOp sum;
  if (Operation *def = loss.getDefiningOp())
    worklist.push_back(def);
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (op->getBlock() != &body || !seen.insert(op))
      continue;
    auto generic = dyn_cast<linalg::GenericOp>(op);
    bool reduces = generic && generic.getNumResults() == 1 &&
                   isScalar(generic.getResult(0)) &&
                   llvm::any_of(generic.getDpsInputs(),
                                [&](Value v) { return !isScalar(v); });
    if (reduces) {
      if (sum && sum != generic)
        return nullptr; // two sums: not one reduction's function
      sum = generic;
      continue;
    }
    if (!llvm::all_of(op->getResults(), isScalar))
      return nullptr;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        worklist.push_back(def);
  }
  if (!sum || !llvm::all_of(sum.getIteratorTypesArray(), [](auto kind) {
        return kind == utils::IteratorType::reduction;
      }))
    return nullptr;
  // Additive: the body yields init + f(inputs), and the init is zeros.
  if (!getAccumulatedTerm(sum))
    return nullptr;
  auto fill = sum.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !matchPattern(fill.getInputs()[0], m_AnyZeroFloat()))
    return nullptr;
  // The tail: the ops after the sum that the loss reads (in block order),
  // none reading the batch but through the sum.
  for (Operation &op : body.without_terminator())
    if (seen.contains(&op) && &op != sum.getOperation() &&
        sum->isBeforeInBlock(&op))
      tail.push_back(&op);
  return sum;
}

/// `type` with the batch dimensions divided by `microbatches`.
RankedTensorType getMicrobatchType(RankedTensorType type,
                                   ArrayRef<int64_t> batchDims,
                                   int64_t microbatches) {
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t d : batchDims)
    shape[d] /= microbatches;
  return type.clone(shape);
}

struct TrainMicrobatchPass
    : public loom::train::impl::TrainMicrobatchPassBase<TrainMicrobatchPass> {
  using TrainMicrobatchPassBase::TrainMicrobatchPassBase;

  void runOnOperation() override {
    if (microbatches < 1) {
      getOperation().emitError("train-microbatch: microbatches must be at "
                               "least 1, got ")
          << int64_t(microbatches);
      return signalPassFailure();
    }
    FailureOr<FunctionOpInterface> found =
        findLossFunction(getOperation(), "train-microbatch", "forward");
    if (failed(found))
      return signalPassFailure();
    auto forward = dyn_cast<func::FuncOp>(found->getOperation());
    if (!forward) {
      found->emitError("train-microbatch: expected the forward to be a "
                       "func.func");
      return signalPassFailure();
    }
    if (microbatches == 1)
      return;
    if (failed(split(forward)))
      return signalPassFailure();
  }

  LogicalResult split(func::FuncOp forward);
};

LogicalResult TrainMicrobatchPass::split(func::FuncOp forward) {
  Location loc = forward.getLoc();
  int64_t m = microbatches;
  if (forward->hasAttr(loom::train::TrainDialect::kMicrobatchesAttrName))
    return emitError(loc) << "train-microbatch: @" << forward.getSymName()
                          << " is already split into microbatches";
  if (!forward.getBody().hasOneBlock())
    return emitError(loc) << "train-microbatch: expected @"
                          << forward.getSymName() << " to have one block";
  Block &body = forward.getBody().front();
  Operation *last = body.empty() ? nullptr : &body.back();
  auto ret = dyn_cast_or_null<func::ReturnOp>(last);
  if (!ret)
    return emitError(loc) << "train-microbatch: expected @"
                          << forward.getSymName()
                          << " to end in func.return, found '"
                          << (last ? last->getName().getStringRef() : "nothing")
                          << "'";
  if (forward.getNumResults() != 1)
    return emitError(loc) << "train-microbatch: expected a forward whose only "
                             "result is the loss, got "
                          << forward.getNumResults() << " results";
  Value loss = ret.getOperand(0);
  Operation *lossOp = loss.getDefiningOp();
  auto crossEntropy = dyn_cast_or_null<CrossEntropyOp>(lossOp);
  auto linearCrossEntropy = dyn_cast_or_null<LinearCrossEntropyOp>(lossOp);
  // Otherwise a function of one sum over the batch: the sum is what each
  // microbatch computes, and `tail` runs once on their total.
  SmallVector<Operation *> tail;
  if (!crossEntropy && !linearCrossEntropy) {
    linalg::GenericOp sum = findSummedLoss(loss, body, tail);
    if (!sum)
      return emitError(loc)
             << "train-microbatch: the loss must be the result of "
                "train.cross_entropy or train.linear_cross_entropy, or scalar "
                "ops on one sum over the batch (a mean squared error), so "
                "that it can be summed over microbatches";
    lossOp = sum;
  }
  LossReduction reduction =
      crossEntropy         ? crossEntropy.getReduction()
      : linearCrossEntropy ? linearCrossEntropy.getReduction()
                           : LossReduction::Sum;
  if (reduction == LossReduction::None)
    return emitError(loc) << "train-microbatch: the loss has reduction none";
  DenseSet<Operation *> tailOps(tail.begin(), tail.end());

  // The batch: dimension 0 of every train.input argument.
  BatchDims dims;
  llvm::SetVector<Value> inputs;
  for (BlockArgument arg : forward.getArguments()) {
    if (!forward.getArgAttr(arg.getArgNumber(), TrainDialect::kInputAttrName))
      continue;
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getRank() == 0 ||
        ShapedType::isDynamic(type.getDimSize(0)))
      return emitError(arg.getLoc())
             << "train-microbatch: input #" << arg.getArgNumber()
             << " must be a tensor with a static batch dimension 0, got "
             << arg.getType();
    if (type.getDimSize(0) % m != 0)
      return emitError(arg.getLoc())
             << "train-microbatch: the batch of input #" << arg.getArgNumber()
             << " (" << type.getDimSize(0) << ") is not divisible into " << m
             << " microbatches";
    dims.mark(arg, 0);
    inputs.insert(arg);
  }
  if (inputs.empty())
    return emitError(loc) << "train-microbatch: @" << forward.getSymName()
                          << " has no train.input argument to split";
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation &op : body.without_terminator()) {
      bool known;
      changed |= propagate(dims, &op, known);
    }
  }
  // Only the inputs are sliced: an argument tied to their batch (a
  // parameter added to it element-wise) would keep its whole batch while
  // the clones that read it get a microbatch.
  for (BlockArgument arg : forward.getArguments())
    if (!inputs.contains(arg) && dims.hasAny(arg))
      return emitError(arg.getLoc())
             << "train-microbatch: argument #" << arg.getArgNumber()
             << " is not a train.input but carries the batch (dimension "
             << dims.getDims(arg).front() << " of " << arg.getType() << ")";
  // Which ops are per microbatch: those reading the inputs, and those whose
  // results carry the batch (their inits).
  DenseSet<Operation *> perMicrobatch;
  for (Operation &op : body.without_terminator()) {
    if (tailOps.contains(&op))
      continue;
    bool readsBatch = llvm::any_of(op.getOperands(), [&](Value v) {
      return inputs.contains(v) ||
             (v.getDefiningOp() && perMicrobatch.contains(v.getDefiningOp()));
    });
    bool carries =
        llvm::any_of(op.getResults(), [&](Value v) { return dims.hasAny(v); });
    if (!readsBatch && !carries)
      continue;
    bool known;
    propagate(dims, &op, known);
    if (!known)
      return op.emitOpError("train-microbatch: cannot tell how this op "
                            "carries the batch");
    if (isa<arith::ConstantOp>(op) &&
        llvm::any_of(op.getResults(), [&](Value v) { return dims.hasAny(v); }))
      return op.emitOpError("train-microbatch: a constant carries the batch; "
                            "compute it from the inputs instead");
    for (Value v : op.getResults()) {
      SmallVector<int64_t> batch = dims.getDims(v);
      auto type = dyn_cast<RankedTensorType>(v.getType());
      if (batch.size() > 1)
        return op.emitOpError("train-microbatch: a result carries the batch "
                              "in ")
               << batch.size() << " dimensions";
      for (int64_t d : batch)
        if (type.getDimSize(d) % m != 0)
          return op.emitOpError("train-microbatch: dimension ")
                 << d << " of " << type << " carries the batch but is not "
                 << "divisible into " << m << " microbatches";
      if (readsBatch && isa<RankedTensorType>(v.getType()) && batch.empty() &&
          v != loss && &op != lossOp)
        return op.emitOpError("train-microbatch: a result reads the batch "
                              "but has no batch dimension (a reduction over "
                              "the batch); only the loss may");
    }
    for (Region &region : op.getRegions())
      for (Block &block : region)
        for (Operation &inner : block)
          for (Value v : inner.getOperands())
            if (v.getParentBlock() == &body && inputs.contains(v))
              return inner.emitOpError(
                  "train-microbatch: a region reads an input directly");
    perMicrobatch.insert(&op);
  }
  if (!perMicrobatch.contains(lossOp))
    return emitError(loc) << "train-microbatch: the loss does not read the "
                             "inputs";

  // Clone the per-microbatch ops once per microbatch, before the return.
  OpBuilder builder(ret);
  LinalgBuilder lb(builder, loc);
  auto lossType = cast<RankedTensorType>(loss.getType());
  Type lossElement = lossType.getElementType();
  SmallVector<Value> losses, counts;
  SmallVector<Operation *> originals;
  for (Operation &op : body.without_terminator())
    if (perMicrobatch.contains(&op))
      originals.push_back(&op);
  for (int64_t mb = 0; mb < m; ++mb) {
    IRMapping mapping;
    for (Value input : inputs) {
      auto type = cast<RankedTensorType>(input.getType());
      int64_t rows = type.getDimSize(0) / m;
      SmallVector<OpFoldResult> offsets(type.getRank(),
                                        builder.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes,
          strides(type.getRank(), builder.getIndexAttr(1));
      offsets[0] = builder.getIndexAttr(mb * rows);
      for (int64_t d = 0; d < type.getRank(); ++d)
        sizes.push_back(
            builder.getIndexAttr(d == 0 ? rows : type.getDimSize(d)));
      auto slice = tensor::ExtractSliceOp::create(
          builder, input.getLoc(), getMicrobatchType(type, {0}, m), input,
          offsets, sizes, strides);
      slice->setAttr(loom::train::TrainDialect::kMicrobatchAttrName,
                     builder.getI64IntegerAttr(mb));
      mapping.map(input, slice.getResult());
    }
    for (Operation *original : originals) {
      Operation &op = *original;
      Operation *clone = builder.clone(op, mapping);
      clone->setAttr(loom::train::TrainDialect::kMicrobatchAttrName,
                     builder.getI64IntegerAttr(mb));
      for (auto [original, result] :
           llvm::zip(op.getResults(), clone->getResults()))
        if (auto type = dyn_cast<RankedTensorType>(original.getType()))
          result.setType(getMicrobatchType(type, dims.getDims(original), m));
      if (auto expand = dyn_cast<tensor::ExpandShapeOp>(clone))
        expand.setStaticOutputShape(expand.getResultType().getShape());
      // A slice's sizes along the batch follow its microbatch type.
      if (auto extract = dyn_cast<tensor::ExtractSliceOp>(clone))
        extract.setStaticSizes(extract.getResultType().getShape());
      if (auto insert = dyn_cast<tensor::InsertSliceOp>(clone))
        insert.setStaticSizes(insert.getSourceType().getShape());
      if (auto ce = dyn_cast<CrossEntropyOp>(clone); ce && &op == lossOp)
        ce.setReduction(LossReduction::Sum);
      if (auto ce = dyn_cast<LinearCrossEntropyOp>(clone); ce && &op == lossOp)
        ce.setReduction(LossReduction::Sum);
      if (&op == lossOp) {
        losses.push_back(clone->getResult(0));
        if (crossEntropy)
          counts.push_back(cast<CrossEntropyOp>(clone).getLabels());
        else if (linearCrossEntropy)
          counts.push_back(cast<LinearCrossEntropyOp>(clone).getLabels());
      }
    }
  }
  // loss = sum of the microbatches' sums [/ max(valid tokens, 1)].
  int64_t ignoreIndex = crossEntropy         ? crossEntropy.getIgnoreIndex()
                        : linearCrossEntropy ? linearCrossEntropy.getIgnoreIndex()
                                             : 0;
  auto scalarMap = [&](unsigned rank) { return lb.map(rank, {}); };
  // a + b on 0-d tensors of `element`.
  auto add = [&](Value a, Value b) {
    Type element = cast<RankedTensorType>(a.getType()).getElementType();
    return lb.generic(lb.empty({}, element), {a, b},
                      {scalarMap(0), scalarMap(0), scalarMap(0)},
                      [](OpBuilder &b, Location l, ValueRange args) -> Value {
                        return arith::AddFOp::create(b, l, args[0], args[1]);
                      });
  };
  Value total = losses.front();
  for (Value next : ArrayRef(losses).drop_front())
    total = add(total, next);
  if (reduction == LossReduction::Mean) {
    // Counted in f32 (exact to 2^24 tokens), whatever the loss's type.
    Type f32 = builder.getF32Type();
    Value count;
    for (Value labels : counts) {
      auto type = cast<RankedTensorType>(labels.getType());
      unsigned rank = type.getRank();
      Value mbCount = lb.generic(
          lb.filled({}, f32, 0.0), {labels},
          {lb.identity(rank), scalarMap(rank)},
          [&](OpBuilder &b, Location l, ValueRange args) -> Value {
            Value ignore = arith::ConstantOp::create(
                b, l, b.getIntegerAttr(type.getElementType(), ignoreIndex));
            Value valid = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne,
                                                args[0], ignore);
            Value one =
                arith::ConstantOp::create(b, l, b.getFloatAttr(f32, 1.0));
            Value zero =
                arith::ConstantOp::create(b, l, b.getFloatAttr(f32, 0.0));
            Value add = arith::SelectOp::create(b, l, valid, one, zero);
            return arith::AddFOp::create(b, l, args[1], add);
          });
      count = count ? add(count, mbCount) : mbCount;
    }
    // sum / max(count, 1), divided in f32 for a narrower loss.
    total = lb.generic(
        lb.empty({}, lossElement), {total, count},
        {scalarMap(0), scalarMap(0), scalarMap(0)},
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value sum = args[0];
          Type wide =
              lossElement.getIntOrFloatBitWidth() < 32 ? f32 : lossElement;
          if (sum.getType() != wide)
            sum = arith::ExtFOp::create(b, l, wide, sum);
          Value n = args[1];
          if (wide != f32)
            n = arith::ExtFOp::create(b, l, wide, n);
          Value one =
              arith::ConstantOp::create(b, l, b.getFloatAttr(wide, 1.0));
          Value denominator = arith::MaximumFOp::create(b, l, n, one);
          Value mean = arith::DivFOp::create(b, l, sum, denominator);
          if (wide != lossElement)
            mean = arith::TruncFOp::create(b, l, lossElement, mean);
          return mean;
        });
  }
  // A summed loss's tail runs once, on the microbatches' total.
  if (!tail.empty()) {
    IRMapping once;
    once.map(lossOp->getResult(0), total);
    for (Operation *op : tail)
      builder.clone(*op, once);
    total = once.lookup(loss);
  }
  ret->setOperand(0, total);
  // The whole-batch ops are dead now.
  for (Operation *op : llvm::reverse(tail))
    op->erase();
  for (Operation *op : llvm::reverse(originals)) {
    if (!op->use_empty())
      return op->emitOpError("train-microbatch: internal error: a whole-batch "
                             "op is still used");
    op->erase();
  }
  forward->setAttr(loom::train::TrainDialect::kMicrobatchesAttrName,
                   builder.getI64IntegerAttr(m));
  return success();
}

} // namespace
