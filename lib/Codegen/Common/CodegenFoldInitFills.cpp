//===- FoldInitFills.cpp - elementwise ops read a fill's value ------------===//
//
// An all-parallel linalg op reads each element of an init through a
// permutation map exactly where it writes it, so an init that is a fill
// reads as the fill's value. The payload takes that value, and the init
// becomes empty: no fill kernel, no read of the filled tensor.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Common/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace loom::codegen {
#define GEN_PASS_DEF_CODEGENFOLDINITFILLSPASS
#include "loom/Codegen/Common/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

/// The fill of a `tensor.empty` that `init` is, if `op` may read its value
/// instead: all loops parallel, the init read through a permutation, and
/// the payload either not reading it or a generic's (whose block argument
/// can be replaced).
linalg::FillOp foldableFill(linalg::LinalgOp op, OpOperand &init) {
  auto fill = init.get().getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.hasPureTensorSemantics() ||
      !fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>() ||
      op.getNumLoops() != op.getNumParallelLoops() ||
      !op.getMatchingIndexingMap(&init).isPermutation())
    return nullptr;
  if (!op.payloadUsesValueFromOperand(&init))
    return fill;
  Value value = fill.getInputs()[0];
  if (!isa<linalg::GenericOp>(op) ||
      value.getType() != op.getMatchingBlockArgument(&init).getType())
    return nullptr;
  return fill;
}

/// Folds every fill `op`'s inits can do without; returns how many.
int64_t foldInitFills(RewriterBase &rewriter, linalg::LinalgOp op) {
  int64_t folded = 0;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    linalg::FillOp fill = foldableFill(op, init);
    if (!fill)
      continue;
    rewriter.setInsertionPoint(op);
    auto dest = fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>();
    Value empty =
        tensor::EmptyOp::create(rewriter, op.getLoc(), dest.getMixedSizes(),
                                dest.getType().getElementType());
    rewriter.modifyOpInPlace(op, [&] {
      if (op.payloadUsesValueFromOperand(&init))
        rewriter.replaceAllUsesWith(op.getMatchingBlockArgument(&init),
                                    fill.getInputs()[0]);
      init.set(empty);
    });
    ++folded;
  }
  return folded;
}

struct CodegenFoldInitFillsPass
    : loom::codegen::impl::CodegenFoldInitFillsPassBase<
          CodegenFoldInitFillsPass> {
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureTensorSemantics())
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops)
      numFolded += foldInitFills(rewriter, op);
    // Fills left without a user, and their empty tensors.
    SmallVector<linalg::FillOp> dead;
    getOperation().walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() && fill->use_empty())
        dead.push_back(fill);
    });
    for (linalg::FillOp fill : dead) {
      auto empty = fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>();
      rewriter.eraseOp(fill);
      if (empty && empty->use_empty())
        rewriter.eraseOp(empty);
    }
  }
};

} // namespace
