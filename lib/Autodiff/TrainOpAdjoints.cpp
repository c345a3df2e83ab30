//===- TrainOpAdjoints.cpp - derivatives of train ops ---------------------===//
//
// Embedding, attention and cross-entropy have gradient ops of their own,
// which keep the backward as compact as the forward (and give kernels and
// the fused-loss pass something to match). RMSNorm and rotary embedding are
// differentiated through their decompositions, recomputed in the backward
// from the op's operands: the backward of a train op reads only its operands.
//
//===----------------------------------------------------------------------===//

#include "ReverseMode.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;
using namespace loom::train;
using namespace loom::autodiff;

bool loom::autodiff::isTrainDifferentiable(Operation *op) {
  return isa_and_nonnull<TrainDialect>(op->getDialect());
}

namespace {
/// Records the top-level ops a decomposition creates in the insertion block.
struct CollectInserted : public OpBuilder::Listener {
  Block *block;
  SmallVector<Operation *> ops;
  explicit CollectInserted(Block *block) : block(block) {}
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (op->getBlock() == block)
      ops.push_back(op);
  }
};
} // namespace

/// Differentiates `op` through its decomposition, built at the insertion
/// point (so the backward recomputes what it needs from the operands).
static LogicalResult differentiateByDecomposition(ReverseMode &rm,
                                                  DecomposableOpInterface op) {
  OpBuilder &b = rm.getBuilder();
  CollectInserted collector(b.getInsertionBlock());
  OpBuilder::Listener *previous = b.getListener();
  b.setListener(&collector);
  FailureOr<SmallVector<Value>> replacements = op.decompose(b);
  b.setListener(previous);
  if (failed(replacements))
    return failure();
  rm.propagateActivity(collector.ops);
  for (auto [result, replacement] : llvm::zip(op->getResults(), *replacements))
    if (Value g = rm.getAdjoint(result))
      rm.accumulate(replacement, g);
  return rm.differentiate(collector.ops);
}

LogicalResult loom::autodiff::differentiateTrainOp(ReverseMode &rm,
                                                   Operation *op) {
  OpBuilder &b = rm.getBuilder();
  Location loc = op->getLoc();
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](EmbeddingOp o) {
        if (Value g = rm.getAdjoint(o.getResult()))
          rm.accumulate(o.getTable(),
                        EmbeddingGradOp::create(b, loc, o.getTable().getType(),
                                                g, o.getIds()));
        return success();
      })
      .Case([&](AttentionOp o) {
        Value g = rm.getAdjoint(o.getResult());
        if (!g)
          return success();
        auto grads = AttentionGradOp::create(
            b, loc, o.getQuery().getType(), o.getKey().getType(),
            o.getValue().getType(), o.getQuery(), o.getKey(), o.getValue(), g,
            o.getCausalAttr(), o.getScaleAttr());
        rm.accumulate(o.getQuery(), grads.getQueryGrad());
        rm.accumulate(o.getKey(), grads.getKeyGrad());
        rm.accumulate(o.getValue(), grads.getValueGrad());
        return success();
      })
      .Case([&](CrossEntropyOp o) {
        Value g = rm.getAdjoint(o.getResult());
        if (!g)
          return success();
        rm.accumulate(o.getLogits(),
                      CrossEntropyGradOp::create(
                          b, loc, o.getLogits().getType(), o.getLogits(),
                          o.getLabels(), g, o.getIgnoreIndexAttr(),
                          o.getReductionAttr(), o.getLabelSmoothingAttr(),
                          o.getZLossAttr()));
        return success();
      })
      .Case([&](LinearCrossEntropyOp o) -> LogicalResult {
        if (rm.getAdjoint(o.getLse()))
          return o.emitOpError("differentiating through the log-sum-exp "
                               "result is not supported");
        Value g = rm.getAdjoint(o.getLoss());
        if (!g)
          return success();
        auto grads = LinearCrossEntropyGradOp::create(
            b, loc, o.getHidden(), o.getWeight(), o.getLabels(), o.getLse(), g,
            o);
        rm.accumulate(o.getHidden(), grads.getHiddenGrad());
        rm.accumulate(o.getWeight(), grads.getWeightGrad());
        if (Value bias = o.getBias())
          rm.accumulate(bias, grads.getBiasGrad());
        return success();
      })
      .Case([&](RoPEOp o) {
        // A rotation: its transpose is its inverse, one op that decomposes
        // into halves written in place, as the forward does.
        Value g = rm.getAdjoint(o.getResult());
        if (!g)
          return success();
        auto grad =
            RoPEOp::create(b, loc, g.getType(), g, o.getThetaAttr(),
                           o.getInverse() ? UnitAttr() : b.getUnitAttr());
        rm.accumulate(o.getInput(), grad.getResult());
        return success();
      })
      .Case<RMSNormOp>([&](Operation *o) {
        return differentiateByDecomposition(rm,
                                            cast<DecomposableOpInterface>(o));
      })
      .Default([&](Operation *o) {
        return o->emitOpError("is a gradient op; train-autodiff does not "
                              "compute second derivatives");
      });
}
