//===- TensorAdjoints.cpp - derivatives of tensor reshapes and slices -----===//
//
// Each rule is the structural inverse of its op: a reshape's gradient is the
// opposite reshape, a slice's is an insertion into zeros, a concatenation's
// is a slice per input.
//
//===----------------------------------------------------------------------===//

#include "ReverseMode.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;
using namespace loom::autodiff;

bool loom::autodiff::isTensorDifferentiable(Operation *op) {
  return isa<tensor::EmptyOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::ExtractSliceOp, tensor::InsertSliceOp, tensor::ConcatOp,
             tensor::CastOp, tensor::ExtractOp, tensor::FromElementsOp>(op);
}

static Value zerosLike(ReverseMode &rm, Location loc, Type type) {
  auto tensorType = cast<RankedTensorType>(type);
  return rm.linalg(loc).filled(tensorType.getShape(),
                               tensorType.getElementType(), 0.0);
}

/// The slice of `g` that `slice` takes, read past insertions into `g` of
/// slices disjoint from it (an insert_slice's rule zeroes its slice of the
/// gradient; the slices next to it are the gradient's own).
static Value sliceOf(OpBuilder &b, Location loc, Value g,
                     OffsetSizeAndStrideOpInterface slice, Type type) {
  while (auto insert = g.getDefiningOp<tensor::InsertSliceOp>()) {
    if (!disjointSlices(insert, slice))
      break;
    g = insert.getDest();
  }
  return tensor::ExtractSliceOp::create(
      b, loc, cast<RankedTensorType>(type), g, slice.getMixedOffsets(),
      slice.getMixedSizes(), slice.getMixedStrides());
}

LogicalResult loom::autodiff::differentiateTensorOp(ReverseMode &rm,
                                                    Operation *op) {
  OpBuilder &b = rm.getBuilder();
  Location loc = op->getLoc();
  Value g =
      op->getNumResults() == 1 ? rm.getAdjoint(op->getResult(0)) : Value();
  if (!g)
    return success();
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tensor::EmptyOp) { return success(); })
      .Case([&](tensor::ExpandShapeOp o) {
        rm.accumulate(o.getSrc(), tensor::CollapseShapeOp::create(
                                      b, loc, o.getSrcType(), g,
                                      o.getReassociationIndices()));
        return success();
      })
      .Case([&](tensor::CollapseShapeOp o) {
        rm.accumulate(o.getSrc(), tensor::ExpandShapeOp::create(
                                      b, loc, o.getSrcType(), g,
                                      o.getReassociationIndices()));
        return success();
      })
      .Case([&](tensor::ExtractSliceOp o) {
        Value zeros = zerosLike(rm, loc, o.getSourceType());
        rm.accumulate(o.getSource(),
                      tensor::InsertSliceOp::create(
                          b, loc, g, zeros, o.getMixedOffsets(),
                          o.getMixedSizes(), o.getMixedStrides()));
        return success();
      })
      .Case([&](tensor::InsertSliceOp o) {
        rm.accumulate(o.getSource(), sliceOf(b, loc, g, o, o.getSourceType()));
        Value zeros = zerosLike(rm, loc, o.getSourceType());
        rm.accumulate(o.getDest(), tensor::InsertSliceOp::create(
                                       b, loc, zeros, g, o.getMixedOffsets(),
                                       o.getMixedSizes(), o.getMixedStrides()));
        return success();
      })
      .Case([&](tensor::ConcatOp o) {
        int64_t dim = o.getDim();
        int64_t offset = 0;
        for (Value input : o.getInputs()) {
          auto type = cast<RankedTensorType>(input.getType());
          SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
          offsets[dim] = b.getIndexAttr(offset);
          SmallVector<OpFoldResult> sizes = llvm::map_to_vector(
              type.getShape(), [&](int64_t size) -> OpFoldResult {
                return b.getIndexAttr(size);
              });
          SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
          rm.accumulate(input, tensor::ExtractSliceOp::create(
                                   b, loc, type, g, offsets, sizes, strides));
          offset += type.getDimSize(dim);
        }
        return success();
      })
      .Case([&](tensor::CastOp o) {
        rm.accumulate(o.getSource(), tensor::CastOp::create(
                                         b, loc, o.getSource().getType(), g));
        return success();
      })
      .Case([&](tensor::FromElementsOp o) {
        // Element i (row-major) takes the gradient at its position.
        auto type = cast<RankedTensorType>(o.getType());
        SmallVector<int64_t> strides = computeStrides(type.getShape());
        for (auto [linear, element] : llvm::enumerate(o.getElements())) {
          SmallVector<Value> indices;
          for (int64_t pos : delinearize(linear, strides))
            indices.push_back(arith::ConstantIndexOp::create(b, loc, pos));
          rm.accumulate(element, tensor::ExtractOp::create(b, loc, g, indices));
        }
        return success();
      })
      .Case([&](tensor::ExtractOp o) {
        Value zeros = zerosLike(rm, loc, o.getTensor().getType());
        rm.accumulate(o.getTensor(), tensor::InsertOp::create(b, loc, g, zeros,
                                                              o.getIndices()));
        return success();
      });
}
