//===- LinalgBuilder.cpp - emit linalg on tensors tersely -----------------===//

#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace loom;

Value LinalgBuilder::floatConstant(Type type, double value) {
  return arith::ConstantOp::create(builder, loc,
                                   builder.getFloatAttr(type, value));
}

Value LinalgBuilder::i64Constant(int64_t value) {
  return arith::ConstantIntOp::create(builder, loc, value, 64);
}

Value LinalgBuilder::negativeInfinity(Type type) {
  auto floatType = cast<FloatType>(type);
  APFloat inf =
      APFloat::getInf(floatType.getFloatSemantics(), /*Negative=*/true);
  return arith::ConstantOp::create(builder, loc,
                                   builder.getFloatAttr(type, inf));
}

Value LinalgBuilder::empty(ArrayRef<int64_t> shape, Type elementType) {
  return tensor::EmptyOp::create(builder, loc, shape, elementType);
}

Value LinalgBuilder::filled(ArrayRef<int64_t> shape, Value value) {
  Value init = empty(shape, value.getType());
  return linalg::FillOp::create(builder, loc, value, init).getResult(0);
}

Value LinalgBuilder::filled(ArrayRef<int64_t> shape, Type elementType,
                            double value) {
  return filled(shape, floatConstant(elementType, value));
}

AffineMap LinalgBuilder::map(unsigned numDims, ArrayRef<unsigned> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned dim : dims)
    exprs.push_back(builder.getAffineDimExpr(dim));
  return AffineMap::get(numDims, 0, exprs, builder.getContext());
}

AffineMap LinalgBuilder::identity(unsigned numDims) {
  return AffineMap::getMultiDimIdentityMap(numDims, builder.getContext());
}

Value LinalgBuilder::generic(Value init, ValueRange inputs,
                             ArrayRef<AffineMap> maps, BodyFn body) {
  AffineMap outputMap = maps.back();
  unsigned numDims = outputMap.getNumDims();
  SmallVector<utils::IteratorType> iterators(numDims,
                                             utils::IteratorType::reduction);
  for (AffineExpr expr : outputMap.getResults())
    iterators[cast<AffineDimExpr>(expr).getPosition()] =
        utils::IteratorType::parallel;
  auto op = linalg::GenericOp::create(
      builder, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps,
      iterators, [&](OpBuilder &b, Location l, ValueRange args) {
        linalg::YieldOp::create(b, l, body(b, l, args));
      });
  return op.getResult(0);
}

Value LinalgBuilder::reduce(Value input, ArrayRef<unsigned> keptDims,
                            Value initValue, bool isMax) {
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> shape;
  for (unsigned dim : keptDims)
    shape.push_back(type.getDimSize(dim));
  Value init = filled(shape, initValue);
  unsigned rank = type.getRank();
  return generic(init, input, {identity(rank), map(rank, keptDims)},
                 [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                   if (isMax)
                     return arith::MaximumFOp::create(b, l, args[0], args[1]);
                   return arith::AddFOp::create(b, l, args[0], args[1]);
                 });
}

Value LinalgBuilder::sum(Value input, ArrayRef<unsigned> keptDims) {
  Type elementType = cast<RankedTensorType>(input.getType()).getElementType();
  return reduce(input, keptDims, floatConstant(elementType, 0.0),
                /*isMax=*/false);
}

Value LinalgBuilder::max(Value input, ArrayRef<unsigned> keptDims) {
  Type elementType = cast<RankedTensorType>(input.getType()).getElementType();
  return reduce(input, keptDims, negativeInfinity(elementType), /*isMax=*/true);
}

static SmallVector<ReassociationIndices>
toReassociation(ArrayRef<SmallVector<int64_t, 2>> groups) {
  SmallVector<ReassociationIndices> result;
  for (const SmallVector<int64_t, 2> &group : groups)
    result.push_back(ReassociationIndices(group.begin(), group.end()));
  return result;
}

Value LinalgBuilder::expand(Value input, ArrayRef<int64_t> shape,
                            ArrayRef<SmallVector<int64_t, 2>> groups) {
  auto type = cast<RankedTensorType>(input.getType());
  auto resultType = RankedTensorType::get(shape, type.getElementType());
  return tensor::ExpandShapeOp::create(builder, loc, resultType, input,
                                       toReassociation(groups));
}

Value LinalgBuilder::collapse(Value input,
                              ArrayRef<SmallVector<int64_t, 2>> groups) {
  return tensor::CollapseShapeOp::create(builder, loc, input,
                                         toReassociation(groups));
}

Value LinalgBuilder::convert(Value input, Type elementType) {
  auto type = cast<RankedTensorType>(input.getType());
  Type from = type.getElementType();
  if (from == elementType)
    return input;
  bool widen =
      elementType.getIntOrFloatBitWidth() > from.getIntOrFloatBitWidth();
  unsigned rank = type.getRank();
  return generic(empty(type.getShape(), elementType), input,
                 {identity(rank), identity(rank)},
                 [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                   if (widen)
                     return arith::ExtFOp::create(b, l, elementType, args[0]);
                   return arith::TruncFOp::create(b, l, elementType, args[0]);
                 });
}
