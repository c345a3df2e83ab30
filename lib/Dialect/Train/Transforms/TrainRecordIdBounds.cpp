//===- TrainRecordIdBounds.cpp - train-record-id-bounds -------------------===//
//
// Tags each `train.input` argument of ids with the vocabulary of the ops
// that read it, for the trainer's check of its data (docs/Data.md).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/MapVector.h"

namespace loom::train {
#define GEN_PASS_DEF_TRAINRECORDIDBOUNDSPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;
using loom::train::TrainDialect;

namespace {

/// The argument `ids` is a reshaped, sliced or cast view of, or null.
BlockArgument getSourceArgument(Value ids) {
  while (Operation *op = ids.getDefiningOp()) {
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
      ids = collapse.getSrc();
    else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
      ids = expand.getSrc();
    else if (auto reshape = dyn_cast<tensor::ReshapeOp>(op))
      ids = reshape.getSource();
    else if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
      ids = slice.getSource();
    else if (auto cast = dyn_cast<tensor::CastOp>(op))
      ids = cast.getSource();
    else
      return {};
  }
  return dyn_cast<BlockArgument>(ids);
}

struct TrainRecordIdBoundsPass
    : public loom::train::impl::TrainRecordIdBoundsPassBase<
          TrainRecordIdBoundsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    // Each input argument's smallest bound, in the order found.
    llvm::MapVector<unsigned, int64_t> bounds;
    auto record = [&](Value ids, int64_t bound) {
      BlockArgument arg = getSourceArgument(ids);
      if (!arg || arg.getOwner() != &func.getBody().front() ||
          !func.getArgAttr(arg.getArgNumber(), TrainDialect::kInputAttrName) ||
          ShapedType::isDynamic(bound) || bound < 1)
        return;
      auto [it, inserted] = bounds.try_emplace(arg.getArgNumber(), bound);
      if (!inserted)
        it->second = std::min(it->second, bound);
    };
    // The table's rows, the logits' last dimension, the weight's rows.
    auto size = [](Value v, bool last) {
      auto type = cast<RankedTensorType>(v.getType());
      return type.getRank() == 0
                 ? ShapedType::kDynamic
                 : type.getDimSize(last ? type.getRank() - 1 : 0);
    };
    func.walk([&](Operation *op) {
      if (auto embedding = dyn_cast<loom::train::EmbeddingOp>(op))
        record(embedding.getIds(), size(embedding.getTable(), false));
      else if (auto loss = dyn_cast<loom::train::CrossEntropyOp>(op))
        record(loss.getLabels(), size(loss.getLogits(), true));
      else if (auto fused = dyn_cast<loom::train::LinearCrossEntropyOp>(op))
        record(fused.getLabels(), size(fused.getWeight(), false));
    });
    Builder builder(&getContext());
    for (auto [arg, bound] : bounds) {
      // A bound already recorded (a rerun) is kept if it is smaller.
      if (auto old = func.getArgAttrOfType<IntegerAttr>(
              arg, TrainDialect::kIdBoundAttrName))
        bound = std::min(bound, old.getInt());
      func.setArgAttr(arg, TrainDialect::kIdBoundAttrName,
                      builder.getI64IntegerAttr(bound));
    }
  }
};

} // namespace
