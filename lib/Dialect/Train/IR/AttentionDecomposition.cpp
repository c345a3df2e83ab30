//===- AttentionDecomposition.cpp - attention and its gradient in linalg --===//
//
// Grouped-query attention works on the query reshaped to
// [batch, seq, kv_heads, group, head_dim], so every contraction below reads
// key and value heads directly instead of materialising repeated copies.
// Probabilities are [batch, kv_heads, group, seq_q, seq_k].
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

/// Sizes shared by the forward and backward decompositions.
struct AttentionShape {
  int64_t batch, seqQ, seqK, heads, kvHeads, group, headDim;
  Type elementType;

  AttentionShape(RankedTensorType query, RankedTensorType key)
      : batch(query.getDimSize(0)), seqQ(query.getDimSize(1)),
        seqK(key.getDimSize(1)), heads(query.getDimSize(2)),
        kvHeads(key.getDimSize(2)), group(heads / kvHeads),
        headDim(query.getDimSize(3)), elementType(query.getElementType()) {}

  SmallVector<int64_t> groupedQuery() const {
    return {batch, seqQ, kvHeads, group, headDim};
  }
  SmallVector<int64_t> probs() const {
    return {batch, kvHeads, group, seqQ, seqK};
  }
  SmallVector<int64_t> rows() const { return {batch, kvHeads, group, seqQ}; }
};

/// The grouping of [b, s, h, d] into [b, s, kv, g, d] and back.
const SmallVector<SmallVector<int64_t, 2>> kHeadGroups = {
    {0}, {1}, {2, 3}, {4}};

/// A contraction `out += a * b * scale` as one generic.
Value contract(LinalgBuilder &lb, Value init, Value a, Value b,
               ArrayRef<AffineMap> maps, Value scale = {}) {
  return lb.generic(init, {a, b}, maps,
                    [&](OpBuilder &bb, Location l, ValueRange args) -> Value {
                      Value product =
                          arith::MulFOp::create(bb, l, args[0], args[1]);
                      if (scale)
                        product = arith::MulFOp::create(bb, l, product, scale);
                      return arith::AddFOp::create(bb, l, args[2], product);
                    });
}

/// softmax(scale * q k^T), masked when causal, as [b, kv, g, s, t].
Value buildProbabilities(LinalgBuilder &lb, const AttentionShape &shape,
                         Value groupedQuery, Value key, bool causal,
                         double scaleValue) {
  Type type = shape.elementType;
  // Dimensions (b, kv, g, s, t, d).
  Value raw =
      contract(lb, lb.filled(shape.probs(), type, 0.0), groupedQuery, key,
               {lb.map(6, {0, 3, 1, 2, 5}), lb.map(6, {0, 4, 1, 5}),
                lb.map(6, {0, 1, 2, 3, 4})});
  Value scale = lb.floatConstant(type, scaleValue);
  Value negInf = lb.negativeInfinity(type);
  Value scores = lb.generic(
      lb.empty(shape.probs(), type), raw, {lb.identity(5), lb.identity(5)},
      [&](OpBuilder &b, Location l, ValueRange args) -> Value {
        Value scaled = arith::MulFOp::create(b, l, args[0], scale);
        if (!causal)
          return scaled;
        Value s = linalg::IndexOp::create(b, l, 3);
        Value t = linalg::IndexOp::create(b, l, 4);
        Value visible =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::ule, t, s);
        return arith::SelectOp::create(b, l, visible, scaled, negInf);
      });
  AffineMap rowMap = lb.map(5, {0, 1, 2, 3});
  Value rowMax = lb.max(scores, {0, 1, 2, 3});
  Value exps =
      lb.generic(lb.empty(shape.probs(), type), {scores, rowMax},
                 {lb.identity(5), rowMap, lb.identity(5)},
                 [](OpBuilder &b, Location l, ValueRange args) -> Value {
                   Value shifted =
                       arith::SubFOp::create(b, l, args[0], args[1]);
                   return math::ExpOp::create(b, l, shifted);
                 });
  Value rowSum = lb.sum(exps, {0, 1, 2, 3});
  return lb.generic(lb.empty(shape.probs(), type), {exps, rowSum},
                    {lb.identity(5), rowMap, lb.identity(5)},
                    [](OpBuilder &b, Location l, ValueRange args) -> Value {
                      return arith::DivFOp::create(b, l, args[0], args[1]);
                    });
}

} // namespace

FailureOr<SmallVector<Value>> AttentionOp::decompose(OpBuilder &builder) {
  LinalgBuilder lb(builder, getLoc());
  AttentionShape shape(getQuery().getType(), getKey().getType());
  Value groupedQuery = lb.expand(getQuery(), shape.groupedQuery(), kHeadGroups);
  Value probs = buildProbabilities(lb, shape, groupedQuery, getKey(),
                                   getCausal(), getScale().convertToDouble());
  // out[b, s, kv, g, d] = sum_t p[b, kv, g, s, t] v[b, t, kv, d];
  // dimensions (b, s, kv, g, d, t).
  Value out =
      contract(lb, lb.filled(shape.groupedQuery(), shape.elementType, 0.0),
               probs, getValue(),
               {lb.map(6, {0, 2, 3, 1, 5}), lb.map(6, {0, 5, 2, 4}),
                lb.map(6, {0, 1, 2, 3, 4})});
  return SmallVector<Value>{lb.collapse(out, kHeadGroups)};
}

FailureOr<SmallVector<Value>> AttentionGradOp::decompose(OpBuilder &builder) {
  LinalgBuilder lb(builder, getLoc());
  AttentionShape shape(getQuery().getType(), getKey().getType());
  Type type = shape.elementType;
  double scaleValue = getScale().convertToDouble();
  Value groupedQuery = lb.expand(getQuery(), shape.groupedQuery(), kHeadGroups);
  Value groupedGrad =
      lb.expand(getResultGrad(), shape.groupedQuery(), kHeadGroups);
  Value probs = buildProbabilities(lb, shape, groupedQuery, getKey(),
                                   getCausal(), scaleValue);
  SmallVector<int64_t> kvShape = {shape.batch, shape.seqK, shape.kvHeads,
                                  shape.headDim};

  // dv[b, t, kv, d] = sum_{g, s} p[b, kv, g, s, t] dout[b, s, kv, g, d];
  // dimensions (b, t, kv, d, g, s).
  Value valueGrad =
      contract(lb, lb.filled(kvShape, type, 0.0), probs, groupedGrad,
               {lb.map(6, {0, 2, 4, 5, 1}), lb.map(6, {0, 5, 2, 4, 3}),
                lb.map(6, {0, 1, 2, 3})});
  // dp[b, kv, g, s, t] = sum_d dout[b, s, kv, g, d] v[b, t, kv, d];
  // dimensions (b, kv, g, s, t, d).
  Value probsGrad =
      contract(lb, lb.filled(shape.probs(), type, 0.0), groupedGrad, getValue(),
               {lb.map(6, {0, 3, 1, 2, 5}), lb.map(6, {0, 4, 1, 5}),
                lb.map(6, {0, 1, 2, 3, 4})});
  // ds = p * (dp - sum_t dp * p)
  Value rowDot =
      contract(lb, lb.filled(shape.rows(), type, 0.0), probsGrad, probs,
               {lb.identity(5), lb.identity(5), lb.map(5, {0, 1, 2, 3})});
  Value scoresGrad = lb.generic(
      lb.empty(shape.probs(), type), {probs, probsGrad, rowDot},
      {lb.identity(5), lb.identity(5), lb.map(5, {0, 1, 2, 3}), lb.identity(5)},
      [](OpBuilder &b, Location l, ValueRange args) -> Value {
        Value centred = arith::SubFOp::create(b, l, args[1], args[2]);
        return arith::MulFOp::create(b, l, args[0], centred);
      });
  Value scale = lb.floatConstant(type, scaleValue);
  // dq[b, s, kv, g, d] = scale sum_t ds[b, kv, g, s, t] k[b, t, kv, d];
  // dimensions (b, s, kv, g, d, t).
  Value queryGrad = contract(
      lb, lb.filled(shape.groupedQuery(), type, 0.0), scoresGrad, getKey(),
      {lb.map(6, {0, 2, 3, 1, 5}), lb.map(6, {0, 5, 2, 4}),
       lb.map(6, {0, 1, 2, 3, 4})},
      scale);
  // dk[b, t, kv, d] = scale sum_{g, s} ds[b, kv, g, s, t] q[b, s, kv, g, d];
  // dimensions (b, t, kv, d, g, s).
  Value keyGrad =
      contract(lb, lb.filled(kvShape, type, 0.0), scoresGrad, groupedQuery,
               {lb.map(6, {0, 2, 4, 5, 1}), lb.map(6, {0, 5, 2, 4, 3}),
                lb.map(6, {0, 1, 2, 3})},
               scale);
  return SmallVector<Value>{lb.collapse(queryGrad, kHeadGroups), keyGrad,
                            valueGrad};
}
