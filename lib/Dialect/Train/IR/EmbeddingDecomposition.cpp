//===- EmbeddingDecomposition.cpp - embedding and its gradient in linalg --===//

#include "loom/Dialect/Train/Decompositions.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace loom;
using namespace loom::train;

/// A gather: one generic over the result whose body extracts the table
/// element named by the id and the column index.
FailureOr<SmallVector<Value>> EmbeddingOp::decompose(OpBuilder &builder) {
  LinalgBuilder lb(builder, getLoc());
  RankedTensorType resultType = getResult().getType();
  unsigned rank = resultType.getRank();
  SmallVector<unsigned> idDims =
      llvm::to_vector(llvm::seq<unsigned>(0, rank - 1));
  Value table = getTable();
  Value init = lb.empty(resultType.getShape(), resultType.getElementType());
  Value result = lb.generic(
      init, getIds(), {lb.map(rank, idDims), lb.identity(rank)},
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        Value row =
            arith::IndexCastOp::create(b, loc, b.getIndexType(), args[0]);
        Value col = linalg::IndexOp::create(b, loc, rank - 1);
        return tensor::ExtractOp::create(b, loc, table, ValueRange{row, col});
      });
  return SmallVector<Value>{result};
}

namespace {} // namespace

/// A scatter-add: a loop over the tokens that adds each gradient row into the
/// table row its id names. It costs tokens x width, not tokens x rows x width
/// as a one-hot contraction would. A bf16 or f16 table is summed in an f32
/// one and rounded once at the end, as the runtime's kernel does (a frequent
/// token's thousands of rows would otherwise stop adding up).
FailureOr<SmallVector<Value>> EmbeddingGradOp::decompose(OpBuilder &builder) {
  Location loc = getLoc();
  LinalgBuilder lb(builder, loc);
  RankedTensorType resultType = getResult().getType();
  Type elementType = resultType.getElementType();
  int64_t width = resultType.getDimSize(1);
  if (!getIds().getType().hasStaticShape() || ShapedType::isDynamic(width))
    return emitOpError("decomposition needs static shapes");
  FlatTokens flat = flattenTokens(*this, lb);
  Value ids = flat.ids, grad = flat.grad;
  int64_t tokens = flat.tokens;

  Type accType = elementType;
  if (auto floatType = dyn_cast<FloatType>(elementType);
      floatType && floatType.getWidth() < 32)
    accType = builder.getF32Type();
  Value zero = lb.filled(resultType.getShape(), accType, 0.0);
  Value lower = arith::ConstantIndexOp::create(builder, loc, 0);
  Value upper = arith::ConstantIndexOp::create(builder, loc, tokens);
  Value step = arith::ConstantIndexOp::create(builder, loc, 1);
  auto loop = scf::ForOp::create(
      builder, loc, lower, upper, step, ValueRange{zero},
      [&](OpBuilder &b, Location l, Value token, ValueRange iterArgs) {
        LinalgBuilder body(b, l);
        Value id = tensor::ExtractOp::create(b, l, ids, token);
        Value row = arith::IndexCastOp::create(b, l, b.getIndexType(), id);
        SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1),
                                           b.getIndexAttr(width)};
        SmallVector<OpFoldResult> strides = {b.getIndexAttr(1),
                                             b.getIndexAttr(1)};
        SmallVector<OpFoldResult> accOffsets = {row, b.getIndexAttr(0)};
        SmallVector<OpFoldResult> gradOffsets = {token, b.getIndexAttr(0)};
        auto rowType = RankedTensorType::get({1, width}, elementType);
        auto accRowType = RankedTensorType::get({1, width}, accType);
        Value acc = tensor::ExtractSliceOp::create(
            b, l, accRowType, iterArgs[0], accOffsets, sizes, strides);
        Value gradRow = tensor::ExtractSliceOp::create(
            b, l, rowType, grad, gradOffsets, sizes, strides);
        Value sum = body.generic(
            acc, gradRow, {body.identity(2), body.identity(2)},
            [&](OpBuilder &bb, Location ll, ValueRange args) -> Value {
              Value g = args[0];
              if (accType != elementType)
                g = arith::ExtFOp::create(bb, ll, accType, g);
              return arith::AddFOp::create(bb, ll, args[1], g);
            });
        Value next = tensor::InsertSliceOp::create(b, l, sum, iterArgs[0],
                                                   accOffsets, sizes, strides);
        scf::YieldOp::create(b, l, next);
      });
  Value table = loop.getResult(0);
  if (accType != elementType)
    table =
        lb.generic(lb.empty(resultType.getShape(), elementType), table,
                   {lb.identity(2), lb.identity(2)},
                   [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                     return arith::TruncFOp::create(b, l, elementType, args[0]);
                   });
  return SmallVector<Value>{table};
}

FlatTokens loom::train::flattenTokens(EmbeddingGradOp op, LinalgBuilder &lb) {
  RankedTensorType idsType = op.getIds().getType();
  Value ids = op.getIds(), grad = op.getGrad();
  if (idsType.getRank() != 1) {
    SmallVector<int64_t, 2> all =
        llvm::to_vector<2>(llvm::seq<int64_t>(0, idsType.getRank()));
    ids = lb.collapse(ids, {all});
    grad = lb.collapse(grad, {all, {idsType.getRank()}});
  }
  return {ids, grad, idsType.getNumElements()};
}
