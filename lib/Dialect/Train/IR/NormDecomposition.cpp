//===- NormDecomposition.cpp - RMSNorm and rotary embedding in linalg -----===//

#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace loom;
using namespace loom::train;

/// `ss = sum(x^2)` over the last dimension, then one elementwise generic:
/// `y = x * rsqrt(ss / d + eps) * w`. Both are plain generics, so autodiff
/// differentiates the decomposition directly.
FailureOr<SmallVector<Value>> RMSNormOp::decompose(OpBuilder &builder) {
  LinalgBuilder lb(builder, getLoc());
  RankedTensorType type = getInput().getType();
  Type elementType = type.getElementType();
  unsigned rank = type.getRank();
  int64_t width = type.getDimSize(rank - 1);
  if (!type.hasStaticShape())
    return emitOpError("decomposition needs a static shape");
  SmallVector<unsigned> rowDims =
      llvm::to_vector(llvm::seq<unsigned>(0, rank - 1));
  SmallVector<int64_t> rowShape(type.getShape().drop_back());

  Value sumOfSquares =
      lb.generic(lb.filled(rowShape, elementType, 0.0), getInput(),
                 {lb.identity(rank), lb.map(rank, rowDims)},
                 [](OpBuilder &b, Location loc, ValueRange args) -> Value {
                   Value square =
                       arith::MulFOp::create(b, loc, args[0], args[0]);
                   return arith::AddFOp::create(b, loc, args[1], square);
                 });
  Value invWidth = lb.floatConstant(elementType, 1.0 / double(width));
  Value eps = lb.floatConstant(elementType, getEps().convertToDouble());
  Value result = lb.generic(
      lb.empty(type.getShape(), elementType),
      {getInput(), sumOfSquares, getWeight()},
      {lb.identity(rank), lb.map(rank, rowDims), lb.map(rank, {rank - 1}),
       lb.identity(rank)},
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        Value meanSquare = arith::MulFOp::create(b, loc, args[1], invWidth);
        Value shifted = arith::AddFOp::create(b, loc, meanSquare, eps);
        Value scale = math::RsqrtOp::create(b, loc, shifted);
        Value normed = arith::MulFOp::create(b, loc, args[0], scale);
        return arith::MulFOp::create(b, loc, normed, args[2]);
      });
  return SmallVector<Value>{result};
}

/// Builds the `[seq, head_dim / 2]` table of cos (or sin) of
/// `s * theta^(-2j / head_dim)`, computed in f64 and rounded once.
static Value buildRotationTable(LinalgBuilder &lb, int64_t seq, int64_t half,
                                double theta, Type elementType, bool isSin) {
  Value init = lb.empty({seq, half}, elementType);
  double exponentScale = -2.0 / double(2 * half);
  OpBuilder &builder = lb.getBuilder();
  Value logTheta = arith::ConstantOp::create(
      builder, lb.getLoc(), builder.getF64FloatAttr(std::log(theta)));
  Value scale = arith::ConstantOp::create(
      builder, lb.getLoc(), builder.getF64FloatAttr(exponentScale));
  return lb.generic(
      init, {}, {lb.identity(2)},
      [&](OpBuilder &b, Location loc, ValueRange) -> Value {
        auto toF64 = [&](unsigned dim) -> Value {
          Value index = linalg::IndexOp::create(b, loc, dim);
          Value asInt =
              arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
          return arith::SIToFPOp::create(b, loc, b.getF64Type(), asInt);
        };
        Value position = toF64(0), pair = toF64(1);
        Value exponent = arith::MulFOp::create(b, loc, pair, scale);
        Value logFreq = arith::MulFOp::create(b, loc, exponent, logTheta);
        Value freq = math::ExpOp::create(b, loc, logFreq);
        Value angle = arith::MulFOp::create(b, loc, position, freq);
        Value value = isSin ? Value(math::SinOp::create(b, loc, angle))
                            : Value(math::CosOp::create(b, loc, angle));
        if (elementType == b.getF64Type())
          return value;
        // Through f32: targets round f32 to bf16/f16, not f64.
        value = arith::TruncFOp::create(b, loc, b.getF32Type(), value);
        if (elementType == b.getF32Type())
          return value;
        return arith::TruncFOp::create(b, loc, elementType, value);
      });
}

/// Splits the head dimension in halves and rotates each pair with elementwise
/// generics against cos/sin tables, each writing its half of the result in
/// place: a slice of the result is its destination, so no tensor.empty is
/// left for eliminate-empty-tensors to replace (which re-sorts the block per
/// replacement: quadratic on an unrolled pipeline stage).
FailureOr<SmallVector<Value>> RoPEOp::decompose(OpBuilder &builder) {
  Location loc = getLoc();
  LinalgBuilder lb(builder, loc);
  RankedTensorType type = getInput().getType();
  if (!type.hasStaticShape())
    return emitOpError("decomposition needs a static shape");
  Type elementType = type.getElementType();
  ArrayRef<int64_t> shape = type.getShape();
  int64_t half = shape[3] / 2;
  SmallVector<int64_t> halfShape = {shape[0], shape[1], shape[2], half};
  auto halfType = RankedTensorType::get(halfShape, elementType);
  SmallVector<OpFoldResult> sizes =
      llvm::map_to_vector(halfShape, [&](int64_t size) -> OpFoldResult {
        return builder.getIndexAttr(size);
      });
  SmallVector<OpFoldResult> strides(4, builder.getIndexAttr(1));
  auto offsets = [&](int64_t start) {
    SmallVector<OpFoldResult> result(3, builder.getIndexAttr(0));
    result.push_back(builder.getIndexAttr(start));
    return result;
  };
  Value first = tensor::ExtractSliceOp::create(
      builder, loc, halfType, getInput(), offsets(0), sizes, strides);
  Value second = tensor::ExtractSliceOp::create(
      builder, loc, halfType, getInput(), offsets(half), sizes, strides);
  double theta = getTheta().convertToDouble();
  Value cos = buildRotationTable(lb, shape[1], half, theta, elementType, false);
  Value sin = buildRotationTable(lb, shape[1], half, theta, elementType, true);

  SmallVector<AffineMap> maps = {lb.identity(4), lb.identity(4),
                                 lb.map(4, {1, 3}), lb.map(4, {1, 3}),
                                 lb.identity(4)};
  // out_a = a * cos -/+ b * sin, into the result's half at `start`.
  Value result = lb.empty(shape, elementType);
  auto rotate = [&](Value a, Value b, bool subtract, int64_t start) {
    Value into = tensor::ExtractSliceOp::create(builder, loc, halfType, result,
                                                offsets(start), sizes, strides);
    Value rotated =
        lb.generic(into, {a, b, cos, sin}, maps,
                   [&](OpBuilder &bb, Location l, ValueRange args) -> Value {
                     Value x = arith::MulFOp::create(bb, l, args[0], args[2]);
                     Value y = arith::MulFOp::create(bb, l, args[1], args[3]);
                     if (subtract)
                       return arith::SubFOp::create(bb, l, x, y);
                     return arith::AddFOp::create(bb, l, x, y);
                   });
    result = tensor::InsertSliceOp::create(builder, loc, rotated, result,
                                           offsets(start), sizes, strides);
  };
  // The inverse turns by the negative angle: sin changes sign.
  bool inverse = getInverse();
  rotate(first, second, /*subtract=*/!inverse, 0);
  rotate(second, first, /*subtract=*/inverse, half);
  return SmallVector<Value>{result};
}
