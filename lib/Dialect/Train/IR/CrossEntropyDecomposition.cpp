//===- CrossEntropyDecomposition.cpp - cross-entropy in linalg ------------===//

#include "CrossEntropyParts.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace loom;
using namespace loom::train;
using namespace loom::train::detail;

Value CrossEntropyParts::isValid(OpBuilder &b, Location loc,
                                 Value label) const {
  Value ignore = arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(label.getType(), ignoreIndex));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, label, ignore);
}

Value CrossEntropyParts::logSumExp(LinalgBuilder &lb) const {
  Value rowMax = lb.max(logits, {0});
  Value sumExp =
      lb.generic(lb.filled({tokens}, type, 0.0), {logits, rowMax},
                 {lb.identity(2), lb.map(2, {0}), lb.map(2, {0})},
                 [](OpBuilder &b, Location l, ValueRange args) -> Value {
                   Value shifted = arith::SubFOp::create(b, l, args[0], args[1]);
                   Value e = math::ExpOp::create(b, l, shifted);
                   return arith::AddFOp::create(b, l, args[2], e);
                 });
  return lb.generic(lb.empty({tokens}, type), {rowMax, sumExp},
                    {lb.identity(1), lb.identity(1), lb.identity(1)},
                    [](OpBuilder &b, Location l, ValueRange args) -> Value {
                      Value log = math::LogOp::create(b, l, args[1]);
                      return arith::AddFOp::create(b, l, args[0], log);
                    });
}

Value CrossEntropyParts::validCount(LinalgBuilder &lb) const {
  Value one = lb.floatConstant(type, 1.0);
  Value zero = lb.floatConstant(type, 0.0);
  return lb.generic(lb.filled({}, type, 0.0), labels,
                    {lb.map(1, {0}), lb.map(1, {})},
                    [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                      Value valid = isValid(b, l, args[0]);
                      Value inc = arith::SelectOp::create(b, l, valid, one, zero);
                      return arith::AddFOp::create(b, l, args[1], inc);
                    });
}

Value CrossEntropyParts::perTokenLoss(LinalgBuilder &lb, Value lse,
                                      double smoothing, double zLoss) const {
  // logits[i, labels[i]], reading column 0 for ignored tokens so the read is
  // always in bounds.
  Value target = lb.generic(
      lb.empty({tokens}, type), labels, {lb.identity(1), lb.identity(1)},
      [&](OpBuilder &b, Location l, ValueRange args) -> Value {
        Value valid = isValid(b, l, args[0]);
        Value zeroLabel = arith::ConstantOp::create(
            b, l, b.getIntegerAttr(args[0].getType(), 0));
        Value label = arith::SelectOp::create(b, l, valid, args[0], zeroLabel);
        Value col = arith::IndexCastOp::create(b, l, b.getIndexType(), label);
        Value row = linalg::IndexOp::create(b, l, 0);
        return tensor::ExtractOp::create(b, l, logits, ValueRange{row, col});
      });

  return perTokenLossFrom(lb, lse, target,
                          smoothing > 0.0 ? lb.sum(logits, {0}) : Value(),
                          smoothing, zLoss);
}

Value CrossEntropyParts::perTokenLossFrom(LinalgBuilder &lb, Value lse,
                                          Value target, Value rowSum,
                                          double smoothing,
                                          double zLoss) const {
  SmallVector<Value> inputs = {lse, target, labels};
  if (smoothing > 0.0)
    inputs.push_back(rowSum);
  SmallVector<AffineMap> maps(inputs.size() + 1, lb.identity(1));
  Value keep = lb.floatConstant(type, 1.0 - smoothing);
  Value smooth = lb.floatConstant(type, smoothing);
  Value invVocab = lb.floatConstant(type, 1.0 / double(fullVocab()));
  Value z = lb.floatConstant(type, zLoss);
  Value zero = lb.floatConstant(type, 0.0);
  return lb.generic(
      lb.empty({tokens}, type), inputs, maps,
      [&](OpBuilder &b, Location l, ValueRange args) -> Value {
        Value nll = arith::SubFOp::create(b, l, args[0], args[1]);
        Value loss = arith::MulFOp::create(b, l, keep, nll);
        if (smoothing > 0.0) {
          Value mean = arith::MulFOp::create(b, l, args[3], invVocab);
          Value uniform = arith::SubFOp::create(b, l, args[0], mean);
          Value term = arith::MulFOp::create(b, l, smooth, uniform);
          loss = arith::AddFOp::create(b, l, loss, term);
        }
        if (zLoss > 0.0) {
          Value square = arith::MulFOp::create(b, l, args[0], args[0]);
          Value term = arith::MulFOp::create(b, l, z, square);
          loss = arith::AddFOp::create(b, l, loss, term);
        }
        return arith::SelectOp::create(b, l, isValid(b, l, args[2]), loss,
                                       zero);
      });
}

Value CrossEntropyParts::reduce(LinalgBuilder &lb, Value perToken,
                                LossReduction reduction) const {
  if (reduction == LossReduction::None)
    return perToken;
  Value total = lb.sum(perToken, {});
  if (reduction == LossReduction::Sum)
    return total;
  Value count = validCount(lb);
  Value one = lb.floatConstant(type, 1.0);
  return lb.generic(lb.empty({}, type), {total, count},
                    {lb.map(0, {}), lb.map(0, {}), lb.map(0, {})},
                    [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                      // Every loss is 0 when every token is ignored: divide
                      // by 1, not 0.
                      Value denominator =
                          arith::MaximumFOp::create(b, l, args[1], one);
                      return arith::DivFOp::create(b, l, args[0], denominator);
                    });
}

Value CrossEntropyParts::tokenWeights(LinalgBuilder &lb, Value lossGrad,
                                      LossReduction reduction) const {
  Value zero = lb.floatConstant(type, 0.0);
  Value one = lb.floatConstant(type, 1.0);
  bool perTokenGrad = reduction == LossReduction::None;
  SmallVector<Value> inputs = {labels, lossGrad};
  SmallVector<AffineMap> maps = {
      lb.map(1, {0}), perTokenGrad ? lb.map(1, {0}) : lb.map(1, {})};
  bool isMean = reduction == LossReduction::Mean;
  if (isMean) {
    inputs.push_back(validCount(lb));
    maps.push_back(lb.map(1, {}));
  }
  maps.push_back(lb.identity(1));
  return lb.generic(
      lb.empty({tokens}, type), inputs, maps,
      [&](OpBuilder &b, Location l, ValueRange args) -> Value {
        Value w = args[1];
        if (isMean) {
          Value denominator = arith::MaximumFOp::create(b, l, args[2], one);
          w = arith::DivFOp::create(b, l, w, denominator);
        }
        return arith::SelectOp::create(b, l, isValid(b, l, args[0]), w, zero);
      });
}

Value CrossEntropyParts::logitsGrad(LinalgBuilder &lb, Value lse,
                                    Value weights, double smoothing,
                                    double zLoss, Value init) const {
  Value zero = lb.floatConstant(type, 0.0);
  Value one = lb.floatConstant(type, 1.0);
  Value keep = lb.floatConstant(type, 1.0 - smoothing);
  Value uniform = lb.floatConstant(type, smoothing / double(fullVocab()));
  Value twiceZ = lb.floatConstant(type, 2.0 * zLoss);
  AffineMap rowMap = lb.map(2, {0});
  return lb.generic(
      init ? init : lb.empty({tokens, vocab}, type),
      {logits, lse, weights, labels},
      {lb.identity(2), rowMap, rowMap, rowMap, lb.identity(2)},
      [&](OpBuilder &b, Location l, ValueRange args) -> Value {
        Value shifted = arith::SubFOp::create(b, l, args[0], args[1]);
        Value p = math::ExpOp::create(b, l, shifted);
        Value zTerm = arith::MulFOp::create(b, l, twiceZ, args[1]);
        Value factor = arith::AddFOp::create(b, l, one, zTerm);
        Value g = arith::MulFOp::create(b, l, p, factor);
        Value col = linalg::IndexOp::create(b, l, 1);
        if (columnOffset)
          col = arith::AddIOp::create(b, l, col, columnOffset);
        Value label =
            arith::IndexCastOp::create(b, l, b.getIndexType(), args[3]);
        Value isTarget =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, col, label);
        Value hit = arith::SelectOp::create(b, l, isTarget, keep, zero);
        g = arith::SubFOp::create(b, l, g, hit);
        g = arith::SubFOp::create(b, l, g, uniform);
        return arith::MulFOp::create(b, l, args[2], g);
      });
}

namespace {

template <typename OpTy> CrossEntropyParts getParts(OpTy op) {
  RankedTensorType type = op.getLogits().getType();
  return {op.getLogits(),        op.getLabels(),
          type.getDimSize(0),    type.getDimSize(1),
          type.getElementType(), op.getIgnoreIndexAttr().getInt()};
}

} // namespace

FailureOr<SmallVector<Value>> CrossEntropyOp::decompose(OpBuilder &builder) {
  LinalgBuilder lb(builder, getLoc());
  if (!getLogits().getType().hasStaticShape())
    return emitOpError("decomposition needs static shapes");
  CrossEntropyParts parts = getParts(*this);
  Value lse = parts.logSumExp(lb);
  Value perToken =
      parts.perTokenLoss(lb, lse, getLabelSmoothing().convertToDouble(),
                         getZLoss().convertToDouble());
  return SmallVector<Value>{parts.reduce(lb, perToken, getReduction())};
}

FailureOr<SmallVector<Value>>
CrossEntropyGradOp::decompose(OpBuilder &builder) {
  LinalgBuilder lb(builder, getLoc());
  if (!getLogits().getType().hasStaticShape())
    return emitOpError("decomposition needs static shapes");
  CrossEntropyParts parts = getParts(*this);
  Value lse = parts.logSumExp(lb);
  Value weights = parts.tokenWeights(lb, getLossGrad(), getReduction());
  return SmallVector<Value>{
      parts.logitsGrad(lb, lse, weights, getLabelSmoothing().convertToDouble(),
                       getZLoss().convertToDouble())};
}
