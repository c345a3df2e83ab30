//===- FuseAttention.cpp - attention as runtime kernels, no scores --------===//
//
// train.attention and the train.attention_grad that reads the same query,
// key and value become calls of the runtime's fused attention kernels
// (train.call_kernel): the forward also returns each query row's
// log-sum-exp, which the backward takes with the output instead of
// recomputing them, and nothing of size seq x seq is ever held.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace loom::train {
#define GEN_PASS_DEF_TRAINFUSEATTENTIONPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;
using namespace loom::train;

namespace {

constexpr StringLiteral kForward = "loomrt_attention_f32";
constexpr StringLiteral kBackward = "loomrt_attention_grad_f32";

/// The kernels' scalars: batch, seq, heads, kv heads, head dim, causal,
/// scale.
SmallVector<Value> scalars(OpBuilder &b, Location loc, RankedTensorType query,
                           RankedTensorType key, bool causal, double scale) {
  SmallVector<Value> values;
  for (int64_t size : {query.getDimSize(0), query.getDimSize(1),
                       query.getDimSize(2), key.getDimSize(2),
                       query.getDimSize(3)})
    values.push_back(arith::ConstantIntOp::create(b, loc, size, 64));
  values.push_back(arith::ConstantIntOp::create(b, loc, causal, 32));
  values.push_back(arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(static_cast<float>(scale))));
  return values;
}

/// Whether the kernels take this attention: f32, equal query and key
/// lengths (the kernels' one `seq`).
bool fusible(RankedTensorType query, RankedTensorType key) {
  return query.getElementType().isF32() && key.getElementType().isF32() &&
         query.getDimSize(1) == key.getDimSize(1);
}

struct FuseAttention
    : loom::train::impl::TrainFuseAttentionPassBase<FuseAttention> {
  void runOnOperation() override {
    SmallVector<AttentionOp> forwards;
    getOperation().walk([&](AttentionOp op) { forwards.push_back(op); });
    for (AttentionOp forward : forwards) {
      auto query = cast<RankedTensorType>(forward.getQuery().getType());
      auto key = cast<RankedTensorType>(forward.getKey().getType());
      if (!fusible(query, key))
        continue;
      OpBuilder b(forward);
      Location loc = forward.getLoc();
      auto lseType = RankedTensorType::get(
          {query.getDimSize(0), query.getDimSize(2), query.getDimSize(1)},
          query.getElementType());
      bool causal = forward.getCausal();
      double scale = forward.getScale().convertToDouble();
      auto fused = CallKernelOp::create(
          b, loc, TypeRange{query, lseType}, kForward,
          ValueRange{forward.getQuery(), forward.getKey(), forward.getValue()},
          ValueRange{tensor::EmptyOp::create(b, loc, query.getShape(),
                                             query.getElementType()),
                     tensor::EmptyOp::create(b, loc, lseType.getShape(),
                                             lseType.getElementType())},
          scalars(b, loc, query, key, causal, scale));
      Value out = fused.getResult(0), lse = fused.getResult(1);
      // Its gradients: every attention_grad after it on the same inputs.
      SmallVector<AttentionGradOp> grads;
      for (Operation *user : forward.getQuery().getUsers())
        if (auto grad = dyn_cast<AttentionGradOp>(user))
          if (grad->getBlock() == forward->getBlock() &&
              forward->isBeforeInBlock(grad) &&
              grad.getKey() == forward.getKey() &&
              grad.getValue() == forward.getValue() &&
              grad.getCausal() == causal &&
              grad.getScale().convertToDouble() == scale)
            grads.push_back(grad);
      for (AttentionGradOp grad : grads) {
        b.setInsertionPoint(grad);
        Location gradLoc = grad.getLoc();
        auto empty = [&](RankedTensorType type) -> Value {
          return tensor::EmptyOp::create(b, gradLoc, type.getShape(),
                                         type.getElementType());
        };
        auto fusedGrad = CallKernelOp::create(
            b, gradLoc, TypeRange{query, key, key, lseType}, kBackward,
            ValueRange{grad.getQuery(), grad.getKey(), grad.getValue(), out,
                       lse, grad.getResultGrad()},
            ValueRange{empty(query), empty(key), empty(key), empty(lseType)},
            scalars(b, gradLoc, query, key, causal, scale));
        grad.replaceAllUsesWith(fusedGrad.getResults().take_front(3));
        grad.erase();
      }
      forward.replaceAllUsesWith(out);
      forward.erase();
    }
  }
};

} // namespace
