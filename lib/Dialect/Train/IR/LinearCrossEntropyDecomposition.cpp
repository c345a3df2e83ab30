//===- LinearCrossEntropyDecomposition.cpp - fused loss, chunked ----------===//
//
// train.linear_cross_entropy and its gradient as an scf.for over chunks of
// tokens. Each iteration computes one `[chunk, vocab]` block of logits with
// a contraction (BLAS on the CPU target), the cross-entropy pieces of
// CrossEntropyParts on it, and (backward) the block's contributions to
// dhidden, dweight and dbias; no value of size `[tokens, vocab]` exists.
// With `chunk_vocab`, each chunk also loops over vocabulary blocks: the
// forward keeps an online log-sum-exp (a running maximum rescales the
// running sum), the backward needs none (the saved LSE is exact). A
// conversion may give the rows' work to runtime kernels (LossRowKernels,
// convert-train-to-kernels) instead of linalg ops. See
// docs/FusedCrossEntropy.md.
//
//===----------------------------------------------------------------------===//

#include "CrossEntropyParts.h"
#include "loom/Dialect/Train/Decompositions.h"
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

/// One chunk's logits, `hidden_c @ weightᵀ (+ bias)`, soft-capped when `softcap
/// > 0`. With `keepTanh` also returns `tanh(z / softcap)` for the backward
/// (null without a cap). Each step writes in place into the block before it
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
                            Value s =
                                arith::MulFOp::create(b, l, args[0], inverse);
                            return math::TanhOp::create(b, l, s).getResult();
                          });
  Value cap = lb.floatConstant(type, softcap);
  Value capped =
      lb.generic(keepTanh ? lb.empty({chunk, vocab}, type) : tanh, tanh,
                 {lb.identity(2), lb.identity(2)},
                 [&](OpBuilder &b, Location l, ValueRange args) {
                   return arith::MulFOp::create(b, l, args[0], cap).getResult();
                 });
  return {capped, keepTanh ? tanh : Value()};
}

/// The forward over vocabulary blocks of `block` columns: an online
/// log-sum-exp (the running maximum rescales the running sum), the target
/// logit picked from the block that holds it, and the row sum for label
/// smoothing. Returns the chunk's `[chunk]` log-sum-exp and loss.
std::pair<Value, Value> forwardByBlocks(OpBuilder &b, Location l,
                                        LinearCrossEntropyOp op, Value hidden,
                                        Value labels, int64_t chunk,
                                        int64_t block, Type type) {
  LinalgBuilder lb(b, l);
  int64_t vocab = op.getWeight().getType().getDimSize(0);
  int64_t ignore = op.getIgnoreIndex();
  double smoothing = op.getLabelSmoothing().convertToDouble();
  double softcap = op.getSoftcap().convertToDouble();
  SmallVector<Value> inits = {lb.filled({chunk}, lb.negativeInfinity(type)),
                              lb.filled({chunk}, type, 0.0),
                              lb.filled({chunk}, type, 0.0)};
  if (smoothing > 0.0)
    inits.push_back(lb.filled({chunk}, type, 0.0));
  Value lower = arith::ConstantIndexOp::create(b, l, 0);
  Value upper = arith::ConstantIndexOp::create(b, l, vocab);
  Value step = arith::ConstantIndexOp::create(b, l, block);
  CrossEntropyParts rowsOnly{Value(), labels, chunk, vocab, type, ignore};
  auto loop = scf::ForOp::create(
      b, l, lower, upper, step, inits,
      [&](OpBuilder &vb, Location vl, Value v, ValueRange acc) {
        LinalgBuilder vlb(vb, vl);
        Value weight = rows(vb, vl, op.getWeight(), v, block);
        Value bias =
            op.getBias() ? rows(vb, vl, op.getBias(), v, block) : Value();
        Value z = chunkLogits(vlb, hidden, weight, bias, chunk, block, type,
                              softcap, /*keepTanh=*/false)
                      .first;
        AffineMap id = vlb.identity(1), row = vlb.map(2, {0});
        // Each result is written into its loop-carried value (bufferisation
        // needs yields equivalent to the iteration arguments).
        Value blockMax = vlb.max(z, {0});
        Value max = vlb.generic(
            vlb.empty({chunk}, type), {acc[0], blockMax}, {id, id, id},
            [](OpBuilder &ob, Location ol, ValueRange args) -> Value {
              return arith::MaximumFOp::create(ob, ol, args[0], args[1]);
            });
        Value rescaled = vlb.generic(
            acc[1], {acc[0], max}, {id, id, id},
            [](OpBuilder &ob, Location ol, ValueRange args) -> Value {
              Value d = arith::SubFOp::create(ob, ol, args[0], args[1]);
              Value e = math::ExpOp::create(ob, ol, d);
              return arith::MulFOp::create(ob, ol, args[2], e);
            });
        Value sum = vlb.generic(
            rescaled, {z, max}, {vlb.identity(2), row, row},
            [](OpBuilder &ob, Location ol, ValueRange args) -> Value {
              Value d = arith::SubFOp::create(ob, ol, args[0], args[1]);
              Value e = math::ExpOp::create(ob, ol, d);
              return arith::AddFOp::create(ob, ol, args[2], e);
            });
        Value carriedMax =
            linalg::CopyOp::create(vb, vl, max, acc[0]).getResult(0);
        // The target logit, from the block whose columns hold the label.
        Value target = vlb.generic(
            acc[2], labels, {id, id},
            [&](OpBuilder &ob, Location ol, ValueRange args) -> Value {
              Value label = arith::IndexCastOp::create(
                  ob, ol, ob.getIndexType(), args[0]);
              Value col = arith::SubIOp::create(ob, ol, label, v);
              Value zero = arith::ConstantIndexOp::create(ob, ol, 0);
              Value width = arith::ConstantIndexOp::create(ob, ol, block);
              Value inBlock = arith::AndIOp::create(
                  ob, ol, rowsOnly.isValid(ob, ol, args[0]),
                  arith::AndIOp::create(
                      ob, ol,
                      arith::CmpIOp::create(ob, ol, arith::CmpIPredicate::sge,
                                            col, zero),
                      arith::CmpIOp::create(ob, ol, arith::CmpIPredicate::slt,
                                            col, width)));
              Value safe = arith::SelectOp::create(ob, ol, inBlock, col, zero);
              Value r = linalg::IndexOp::create(ob, ol, 0);
              Value x =
                  tensor::ExtractOp::create(ob, ol, z, ValueRange{r, safe});
              Value fzero =
                  arith::ConstantOp::create(ob, ol, ob.getFloatAttr(type, 0.0));
              Value add = arith::SelectOp::create(ob, ol, inBlock, x, fzero);
              return arith::AddFOp::create(ob, ol, args[1], add);
            });
        SmallVector<Value> next = {carriedMax, sum, target};
        if (smoothing > 0.0)
          next.push_back(vlb.generic(
              acc[3], z, {vlb.identity(2), row},
              [](OpBuilder &ob, Location ol, ValueRange args) -> Value {
                return arith::AddFOp::create(ob, ol, args[1], args[0]);
              }));
        scf::YieldOp::create(vb, vl, next);
      });
  Value lse = lb.generic(
      lb.empty({chunk}, type), {loop.getResult(0), loop.getResult(1)},
      {lb.identity(1), lb.identity(1), lb.identity(1)},
      [](OpBuilder &ob, Location ol, ValueRange args) -> Value {
        Value log = math::LogOp::create(ob, ol, args[1]);
        return arith::AddFOp::create(ob, ol, args[0], log);
      });
  Value loss = rowsOnly.perTokenLossFrom(
      lb, lse, loop.getResult(2), smoothing > 0.0 ? loop.getResult(3) : Value(),
      smoothing, op.getZLoss().convertToDouble());
  return {lse, loss};
}

/// The block width for `chunk_vocab`: the whole vocabulary when 0 or not
/// smaller, else the largest divisor of the vocabulary up to it.
int64_t vocabBlockFor(int64_t vocab, int64_t requested) {
  return requested <= 0 ? vocab : chunkFor(vocab, requested);
}

/// The sizes and settings both decompositions start from.
struct FusedLoss : FusedLossShape {
  template <typename OpTy> static FailureOr<FusedLoss> get(OpTy op) {
    auto hiddenType = op.getHidden().getType();
    auto weightType = op.getWeight().getType();
    if (!hiddenType.hasStaticShape() || !weightType.hasStaticShape())
      return op.emitOpError("decomposition needs static shapes");
    FusedLoss f;
    f.tokens = hiddenType.getDimSize(0);
    f.dim = hiddenType.getDimSize(1);
    f.vocab = weightType.getDimSize(0);
    if (f.tokens == 0 || f.vocab == 0)
      return op.emitOpError("decomposition needs at least one token and one "
                            "vocabulary entry");
    f.chunk = chunkFor(f.tokens, op.getChunkTokens());
    f.block = vocabBlockFor(f.vocab, op.getChunkVocab());
    f.type = computeType(hiddenType.getElementType());
    f.ignore = op.getIgnoreIndex();
    f.smoothing = op.getLabelSmoothing().convertToDouble();
    f.zLoss = op.getZLoss().convertToDouble();
    f.softcap = op.getSoftcap().convertToDouble();
    return f;
  }

  /// The loop over chunks of tokens, carrying `inits`.
  scf::ForOp loop(
      OpBuilder &b, Location loc, ValueRange inits,
      function_ref<void(OpBuilder &, Location, Value, ValueRange)> body) const {
    Value lower = arith::ConstantIndexOp::create(b, loc, 0);
    Value upper = arith::ConstantIndexOp::create(b, loc, tokens);
    Value step = arith::ConstantIndexOp::create(b, loc, chunk);
    return scf::ForOp::create(b, loc, lower, upper, step, inits, body);
  }
};

} // namespace

namespace {

FailureOr<SmallVector<Value>> decomposeForward(LinearCrossEntropyOp op,
                                               OpBuilder &builder,
                                               const LossRowKernels *kernels) {
  Location loc = op.getLoc();
  LinalgBuilder lb(builder, loc);
  FailureOr<FusedLoss> f = FusedLoss::get(op);
  if (failed(f))
    return failure();
  int64_t tokens = f->tokens, vocab = f->vocab, chunk = f->chunk,
          block = f->block, ignore = f->ignore;
  Type type = f->type;
  double smoothing = f->smoothing, zLoss = f->zLoss, softcap = f->softcap;
  auto loop = f->loop(
      builder, loc,
      ValueRange{lb.empty({tokens}, type), lb.empty({tokens}, type)},
      [&](OpBuilder &b, Location l, Value i, ValueRange acc) {
        LinalgBuilder clb(b, l);
        Value hidden = rows(b, l, op.getHidden(), i, chunk);
        Value labels = rows(b, l, op.getLabels(), i, chunk);
        Value lse, loss;
        if (block < vocab) {
          std::tie(lse, loss) =
              forwardByBlocks(b, l, op, hidden, labels, chunk, block, type);
        } else if (kernels) {
          Value logits = chunkLogits(clb, hidden, op.getWeight(), op.getBias(),
                                     chunk, vocab, type, /*softcap=*/0.0,
                                     /*keepTanh=*/false)
                             .first;
          std::tie(lse, loss) = kernels->forward(b, l, *f, logits, labels);
        } else {
          Value logits =
              chunkLogits(clb, hidden, op.getWeight(), op.getBias(), chunk,
                          vocab, type, softcap, /*keepTanh=*/false)
                  .first;
          CrossEntropyParts parts{logits, labels, chunk, vocab, type, ignore};
          lse = parts.logSumExp(clb);
          loss = parts.perTokenLoss(clb, lse, smoothing, zLoss);
        }
        scf::YieldOp::create(b, l,
                             ValueRange{insertRows(b, l, loss, acc[0], i),
                                        insertRows(b, l, lse, acc[1], i)});
      });
  CrossEntropyParts all{Value(), op.getLabels(), tokens, vocab, type, ignore};
  Value loss = all.reduce(lb, loop.getResult(0), op.getReduction());
  return SmallVector<Value>{loss, loop.getResult(1)};
}

FailureOr<SmallVector<Value>> decomposeGrad(LinearCrossEntropyGradOp op,
                                            OpBuilder &builder,
                                            const LossRowKernels *kernels) {
  Location loc = op.getLoc();
  LinalgBuilder lb(builder, loc);
  FailureOr<FusedLoss> f = FusedLoss::get(op);
  if (failed(f))
    return failure();
  int64_t tokens = f->tokens, dim = f->dim, vocab = f->vocab, chunk = f->chunk,
          block = f->block, ignore = f->ignore;
  Type type = f->type;
  double smoothing = f->smoothing, zLoss = f->zLoss, softcap = f->softcap;
  auto hiddenType = op.getHidden().getType();
  auto weightType = op.getWeight().getType();
  Type gemmType = hiddenType.getElementType();

  CrossEntropyParts all{Value(), op.getLabels(), tokens, vocab, type, ignore};
  Value weights = all.tokenWeights(lb, op.getLossGrad(), op.getReduction());
  SmallVector<Value> inits = {lb.empty({tokens, dim}, type),
                              lb.filled({vocab, dim}, type, 0.0)};
  if (op.getBias())
    inits.push_back(lb.filled({vocab}, type, 0.0));
  // One [chunk, width] tile of the gradient at vocabulary column `offset`
  // (null: the whole vocabulary): recompute the logits, form their
  // gradient in place and accumulate it into dhidden, dweight and dbias.
  // With kernels, `labels` are the chunk's kernelLabels.
  auto tile = [&](OpBuilder &b, Location l, Value hidden, Value labels,
                  Value lse, Value w, Value offset, int64_t width, Value weight,
                  Value bias, Value dHidden, Value dWeight,
                  Value dBias) -> SmallVector<Value> {
    LinalgBuilder tlb(b, l);
    Value grad, gemmGrad;
    if (kernels) {
      Value logits = chunkLogits(tlb, hidden, weight, bias, chunk, width, type,
                                 /*softcap=*/0.0, /*keepTanh=*/false)
                         .first;
      // The bf16 kernel rounds the gradient for the GEMMs, unless dbias
      // needs it in f32 too.
      Type kernelType = gemmType.isBF16() && !dBias ? gemmType : type;
      grad = kernels->backward(b, l, *f, logits, labels, lse, w, offset, width,
                               kernelType);
      if (kernelType != type)
        gemmGrad = grad;
    } else {
      auto [logits, tanh] =
          chunkLogits(tlb, hidden, weight, bias, chunk, width, type, softcap,
                      /*keepTanh=*/true);
      CrossEntropyParts parts{logits, labels, chunk,  width,
                              type,   ignore, offset, vocab};
      // In place: the logits die here.
      grad = parts.logitsGrad(tlb, lse, w, smoothing, zLoss, logits);
      if (tanh) {
        // d(cap * tanh(z / cap)) / dz = 1 - tanh².
        Value one = tlb.floatConstant(type, 1.0);
        grad = tlb.generic(
            grad, {grad, tanh},
            {tlb.identity(2), tlb.identity(2), tlb.identity(2)},
            [&](OpBuilder &ob, Location ol, ValueRange args) -> Value {
              Value square = arith::MulFOp::create(ob, ol, args[1], args[1]);
              Value slope = arith::SubFOp::create(ob, ol, one, square);
              return arith::MulFOp::create(ob, ol, args[0], slope);
            });
      }
    }
    // bf16/f16 operands: the two GEMMs take the logits' gradient rounded to
    // their type and accumulate in f32 (bf16 GEMMs into f32, as the fused
    // loss kernels do; an f32 x bf16 product has no BLAS routine).
    if (!gemmGrad)
      gemmGrad = tlb.convert(grad, gemmType);
    SmallVector<Value> out = {
        // dhidden_c(m, k) += sum_n grad(m, n) weight(n, k)
        contract(tlb, dHidden, gemmGrad, weight,
                 {tlb.map(3, {0, 2}), tlb.map(3, {2, 1}), tlb.map(3, {0, 1})}),
        // dweight(n, k) += sum_m grad(m, n) hidden_c(m, k)
        contract(tlb, dWeight, gemmGrad, hidden,
                 {tlb.map(3, {2, 0}), tlb.map(3, {2, 1}), tlb.map(3, {0, 1})})};
    if (dBias) // dbias(n) += sum_m grad(m, n)
      out.push_back(
          tlb.generic(dBias, grad, {tlb.map(2, {0, 1}), tlb.map(2, {1})},
                      [](OpBuilder &ob, Location ol, ValueRange args) -> Value {
                        return arith::AddFOp::create(ob, ol, args[1], args[0]);
                      }));
    return out;
  };
  auto loop = f->loop(
      builder, loc, inits,
      [&](OpBuilder &b, Location l, Value i, ValueRange acc) {
        LinalgBuilder clb(b, l);
        Value hidden = rows(b, l, op.getHidden(), i, chunk);
        Value labels = rows(b, l, op.getLabels(), i, chunk);
        if (kernels) // once a chunk, not once a vocabulary block
          labels = kernels->labels(b, l, *f, labels);
        Value lse = rows(b, l, op.getLse(), i, chunk);
        Value w = rows(b, l, weights, i, chunk);
        Value dBias = op.getBias() ? acc[2] : Value();
        SmallVector<Value> grads;
        if (block == vocab) {
          grads = tile(b, l, hidden, labels, lse, w, Value(), vocab,
                       op.getWeight(), op.getBias(),
                       clb.filled({chunk, dim}, type, 0.0), acc[1], dBias);
        } else {
          // Vocabulary blocks: dhidden_c accumulates across them; each
          // block updates its rows of dweight and dbias.
          SmallVector<Value> blockInits = {clb.filled({chunk, dim}, type, 0.0),
                                           acc[1]};
          if (dBias)
            blockInits.push_back(dBias);
          Value vLower = arith::ConstantIndexOp::create(b, l, 0);
          Value vUpper = arith::ConstantIndexOp::create(b, l, vocab);
          Value vStep = arith::ConstantIndexOp::create(b, l, block);
          auto blocks = scf::ForOp::create(
              b, l, vLower, vUpper, vStep, blockInits,
              [&](OpBuilder &vb, Location vl, Value v, ValueRange inner) {
                Value bias = op.getBias() ? rows(vb, vl, op.getBias(), v, block)
                                          : Value();
                SmallVector<Value> t = tile(
                    vb, vl, hidden, labels, lse, w, v, block,
                    rows(vb, vl, op.getWeight(), v, block), bias, inner[0],
                    rows(vb, vl, inner[1], v, block),
                    op.getBias() ? rows(vb, vl, inner[2], v, block) : Value());
                SmallVector<Value> next = {
                    t[0], insertRows(vb, vl, t[1], inner[1], v)};
                if (op.getBias())
                  next.push_back(insertRows(vb, vl, t[2], inner[2], v));
                scf::YieldOp::create(vb, vl, next);
              });
          grads.assign(blocks.getResults().begin(), blocks.getResults().end());
        }
        SmallVector<Value> results = {insertRows(b, l, grads[0], acc[0], i),
                                      grads[1]};
        if (op.getBias())
          results.push_back(grads[2]);
        scf::YieldOp::create(b, l, results);
      });
  SmallVector<Value> grads = {
      lb.convert(loop.getResult(0), hiddenType.getElementType()),
      lb.convert(loop.getResult(1), weightType.getElementType())};
  if (op.getBias())
    grads.push_back(lb.convert(loop.getResult(2), weightType.getElementType()));
  return grads;
}

} // namespace

FailureOr<SmallVector<Value>>
LinearCrossEntropyOp::decompose(OpBuilder &builder) {
  return decomposeForward(*this, builder, /*kernels=*/nullptr);
}

FailureOr<SmallVector<Value>>
LinearCrossEntropyGradOp::decompose(OpBuilder &builder) {
  return decomposeGrad(*this, builder, /*kernels=*/nullptr);
}

LossRowKernels::~LossRowKernels() = default;

FailureOr<SmallVector<Value>>
loom::train::decomposeFusedLoss(Operation *op, OpBuilder &builder,
                                const LossRowKernels *kernels) {
  if (auto forward = dyn_cast<LinearCrossEntropyOp>(op))
    return decomposeForward(forward, builder, kernels);
  if (auto grad = dyn_cast<LinearCrossEntropyGradOp>(op))
    return decomposeGrad(grad, builder, kernels);
  return op->emitOpError("is not a fused loss");
}

FailureOr<FusedLossShape> FusedLossShape::get(Operation *op) {
  FailureOr<FusedLoss> f = failure();
  if (auto forward = dyn_cast<LinearCrossEntropyOp>(op))
    f = FusedLoss::get(forward);
  else if (auto grad = dyn_cast<LinearCrossEntropyGradOp>(op))
    f = FusedLoss::get(grad);
  else
    return op->emitOpError("is not a fused loss");
  if (failed(f))
    return failure();
  return FusedLossShape(*f);
}
