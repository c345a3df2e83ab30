//===- LinearCrossEntropyDecomposition.cpp - fused loss, chunked ----------===//
//
// train.linear_cross_entropy and its gradient as an scf.for over chunks of
// tokens. Each iteration computes one `[chunk, vocab]` block of logits with
// a contraction (BLAS on the CPU target), the cross-entropy pieces of
// CrossEntropyParts on it, and (backward) the block's contributions to
// dhidden and dweight; no value of size `[tokens, vocab]` exists. Chunking
// by tokens rather than by vocabulary keeps each row's log-sum-exp a plain
// two-pass reduction over one block (no online rescaling) and each matmul
// as wide as the vocabulary; see docs/FusedCrossEntropy.md.
//
//===----------------------------------------------------------------------===//

#include "CrossEntropyParts.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace loom;
using namespace loom::train;
using namespace loom::train::detail;

namespace {

/// The type the loss is computed in: f32 for narrower floats.
Type computeType(Type element) {
  if (element.getIntOrFloatBitWidth() < 32)
    return Float32Type::get(element.getContext());
  return element;
}

/// The chunk: `requested` tokens if that divides `tokens`, else the largest
/// divisor of `tokens` below it.
int64_t chunkFor(int64_t tokens, int64_t requested) {
  int64_t chunk = std::min(tokens, requested);
  while (tokens % chunk)
    --chunk;
  return chunk;
}

Value extendTo(OpBuilder &b, Location l, Value v, Type type) {
  if (v.getType() == type)
    return v;
  return arith::ExtFOp::create(b, l, type, v);
}

/// `out(m, n) = sum_k a(m, k) b(n, k)`, or any contraction given by `maps`,
/// accumulated in `init` (in its element type).
Value contract(LinalgBuilder &lb, Value init, Value a, Value b,
               ArrayRef<AffineMap> maps) {
  Type type = cast<RankedTensorType>(init.getType()).getElementType();
  return lb.generic(init, {a, b}, maps,
                    [&](OpBuilder &ob, Location l, ValueRange args) -> Value {
                      Value x = extendTo(ob, l, args[0], type);
                      Value y = extendTo(ob, l, args[1], type);
                      Value p = arith::MulFOp::create(ob, l, x, y);
                      return arith::AddFOp::create(ob, l, args[2], p);
                    });
}

/// Rows `[offset, offset + size)` of a 1-D or 2-D tensor.
Value rows(OpBuilder &b, Location l, Value source, Value offset, int64_t size) {
  auto type = cast<RankedTensorType>(source.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes, strides(type.getRank(), b.getIndexAttr(1));
  offsets[0] = offset;
  sizes.push_back(b.getIndexAttr(size));
  for (int64_t d = 1; d < type.getRank(); ++d)
    sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
  return tensor::ExtractSliceOp::create(b, l, source, offsets, sizes, strides);
}

Value insertRows(OpBuilder &b, Location l, Value chunk, Value into,
                 Value offset) {
  auto type = cast<RankedTensorType>(chunk.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes, strides(type.getRank(), b.getIndexAttr(1));
  offsets[0] = offset;
  for (int64_t d = 0; d < type.getRank(); ++d)
    sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
  return tensor::InsertSliceOp::create(b, l, chunk, into, offsets, sizes,
                                       strides);
}

/// One chunk's logits, `hidden_c @ weightᵀ (+ bias)`, soft-capped when `softcap > 0`.
/// With `keepTanh` also returns `tanh(z / softcap)` for the backward (null
/// without a cap). Each step writes in place into the block before it
/// (only the backward's tanh needs a second block).
std::pair<Value, Value> chunkLogits(LinalgBuilder &lb, Value hidden,
                                    Value weight, Value bias, int64_t chunk,
                                    int64_t vocab, Type type, double softcap,
                                    bool keepTanh) {
  // The bias, broadcast over the chunk's tokens, is the matmul's init.
  Value init = lb.filled({chunk, vocab}, type, 0.0);
  if (bias)
    init = lb.generic(lb.empty({chunk, vocab}, type), bias,
                      {lb.map(2, {1}), lb.identity(2)},
                      [&](OpBuilder &b, Location l, ValueRange args) {
                        return extendTo(b, l, args[0], type);
                      });
  Value z = contract(lb, init, hidden, weight,
                     {lb.map(3, {0, 2}), lb.map(3, {1, 2}), lb.map(3, {0, 1})});
  if (softcap <= 0.0)
    return {z, Value()};
  Value inverse = lb.floatConstant(type, 1.0 / softcap);
  Value tanh = lb.generic(z, z, {lb.identity(2), lb.identity(2)},
                          [&](OpBuilder &b, Location l, ValueRange args) {
                            Value s = arith::MulFOp::create(b, l, args[0],
                                                            inverse);
                            return math::TanhOp::create(b, l, s).getResult();
                          });
  Value cap = lb.floatConstant(type, softcap);
  Value capped = lb.generic(keepTanh ? lb.empty({chunk, vocab}, type) : tanh,
                            tanh, {lb.identity(2), lb.identity(2)},
                            [&](OpBuilder &b, Location l, ValueRange args) {
                              return arith::MulFOp::create(b, l, args[0], cap)
                                  .getResult();
                            });
  return {capped, keepTanh ? tanh : Value()};
}

/// Casts a compute-type tensor back to `elementType` if they differ.
Value castTo(LinalgBuilder &lb, Value value, Type elementType) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == elementType)
    return value;
  return lb.generic(lb.empty(type.getShape(), elementType), value,
                    {lb.identity(type.getRank()), lb.identity(type.getRank())},
                    [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                      return arith::TruncFOp::create(b, l, elementType,
                                                     args[0]);
                    });
}

} // namespace

FailureOr<SmallVector<Value>>
LinearCrossEntropyOp::decompose(OpBuilder &builder) {
  Location loc = getLoc();
  LinalgBuilder lb(builder, loc);
  auto hiddenType = getHidden().getType();
  if (!hiddenType.hasStaticShape() || !getWeight().getType().hasStaticShape())
    return emitOpError("decomposition needs static shapes");
  int64_t tokens = hiddenType.getDimSize(0);
  int64_t vocab = getWeight().getType().getDimSize(0);
  int64_t chunk = chunkFor(tokens, getChunkTokens());
  Type type = computeType(hiddenType.getElementType());
  int64_t ignore = getIgnoreIndex();
  double smoothing = getLabelSmoothing().convertToDouble();
  double zLoss = getZLoss().convertToDouble();
  double softcap = getSoftcap().convertToDouble();

  Value lower = arith::ConstantIndexOp::create(builder, loc, 0);
  Value upper = arith::ConstantIndexOp::create(builder, loc, tokens);
  Value step = arith::ConstantIndexOp::create(builder, loc, chunk);
  auto loop = scf::ForOp::create(
      builder, loc, lower, upper, step,
      ValueRange{lb.empty({tokens}, type), lb.empty({tokens}, type)},
      [&](OpBuilder &b, Location l, Value i, ValueRange acc) {
        LinalgBuilder clb(b, l);
        Value hidden = rows(b, l, getHidden(), i, chunk);
        Value labels = rows(b, l, getLabels(), i, chunk);
        Value logits = chunkLogits(clb, hidden, getWeight(), getBias(), chunk,
                                   vocab, type, softcap, /*keepTanh=*/false)
                           .first;
        CrossEntropyParts parts{logits, labels, chunk, vocab, type, ignore};
        Value lse = parts.logSumExp(clb);
        Value loss = parts.perTokenLoss(clb, lse, smoothing, zLoss);
        scf::YieldOp::create(b, l,
                             ValueRange{insertRows(b, l, loss, acc[0], i),
                                        insertRows(b, l, lse, acc[1], i)});
      });
  CrossEntropyParts all{Value(), getLabels(), tokens, vocab, type, ignore};
  Value loss = all.reduce(lb, loop.getResult(0), getReduction());
  return SmallVector<Value>{loss, loop.getResult(1)};
}

FailureOr<SmallVector<Value>>
LinearCrossEntropyGradOp::decompose(OpBuilder &builder) {
  Location loc = getLoc();
  LinalgBuilder lb(builder, loc);
  auto hiddenType = getHidden().getType();
  auto weightType = getWeight().getType();
  if (!hiddenType.hasStaticShape() || !weightType.hasStaticShape())
    return emitOpError("decomposition needs static shapes");
  int64_t tokens = hiddenType.getDimSize(0), dim = hiddenType.getDimSize(1);
  int64_t vocab = weightType.getDimSize(0);
  int64_t chunk = chunkFor(tokens, getChunkTokens());
  Type type = computeType(hiddenType.getElementType());
  int64_t ignore = getIgnoreIndex();
  double smoothing = getLabelSmoothing().convertToDouble();
  double zLoss = getZLoss().convertToDouble();
  double softcap = getSoftcap().convertToDouble();

  CrossEntropyParts all{Value(), getLabels(), tokens, vocab, type, ignore};
  Value weights = all.tokenWeights(lb, getLossGrad(), getReduction());
  Value lower = arith::ConstantIndexOp::create(builder, loc, 0);
  Value upper = arith::ConstantIndexOp::create(builder, loc, tokens);
  Value step = arith::ConstantIndexOp::create(builder, loc, chunk);
  SmallVector<Value> inits = {lb.empty({tokens, dim}, type),
                             lb.filled({vocab, dim}, type, 0.0)};
  if (getBias())
    inits.push_back(lb.filled({vocab}, type, 0.0));
  auto loop = scf::ForOp::create(
      builder, loc, lower, upper, step, inits,
      [&](OpBuilder &b, Location l, Value i, ValueRange acc) {
        LinalgBuilder clb(b, l);
        Value hidden = rows(b, l, getHidden(), i, chunk);
        Value labels = rows(b, l, getLabels(), i, chunk);
        Value lse = rows(b, l, getLse(), i, chunk);
        Value w = rows(b, l, weights, i, chunk);
        auto [logits, tanh] =
            chunkLogits(clb, hidden, getWeight(), getBias(), chunk, vocab,
                        type, softcap, /*keepTanh=*/true);
        CrossEntropyParts parts{logits, labels, chunk, vocab, type, ignore};
        // In place: the logits die here.
        Value grad = parts.logitsGrad(clb, lse, w, smoothing, zLoss, logits);
        if (tanh) {
          // d(cap * tanh(z / cap)) / dz = 1 - tanh².
          Value one = clb.floatConstant(type, 1.0);
          grad = clb.generic(
              grad, {grad, tanh},
              {clb.identity(2), clb.identity(2), clb.identity(2)},
              [&](OpBuilder &ob, Location ol, ValueRange args) -> Value {
                Value square = arith::MulFOp::create(ob, ol, args[1], args[1]);
                Value slope = arith::SubFOp::create(ob, ol, one, square);
                return arith::MulFOp::create(ob, ol, args[0], slope);
              });
        }
        // dhidden_c(m, k) = sum_n grad(m, n) weight(n, k)
        Value dHidden = contract(
            clb, clb.filled({chunk, dim}, type, 0.0), grad, getWeight(),
            {clb.map(3, {0, 2}), clb.map(3, {2, 1}), clb.map(3, {0, 1})});
        // dweight(n, k) += sum_m grad(m, n) hidden_c(m, k)
        Value dWeight = contract(
            clb, acc[1], grad, hidden,
            {clb.map(3, {2, 0}), clb.map(3, {2, 1}), clb.map(3, {0, 1})});
        SmallVector<Value> results = {insertRows(b, l, dHidden, acc[0], i),
                                      dWeight};
        if (getBias()) // dbias(n) += sum_m grad(m, n)
          results.push_back(clb.generic(
              acc[2], grad, {clb.map(2, {0, 1}), clb.map(2, {1})},
              [](OpBuilder &ob, Location ol, ValueRange args) -> Value {
                return arith::AddFOp::create(ob, ol, args[1], args[0]);
              }));
        scf::YieldOp::create(b, l, results);
      });
  SmallVector<Value> grads = {
      castTo(lb, loop.getResult(0), hiddenType.getElementType()),
      castTo(lb, loop.getResult(1), weightType.getElementType())};
  if (getBias())
    grads.push_back(castTo(lb, loop.getResult(2), weightType.getElementType()));
  return grads;
}
