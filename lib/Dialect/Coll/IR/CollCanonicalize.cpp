//===- CollCanonicalize.cpp - folds of coll ops that are always right -----===//
//
// Collectives have side effects, so a fold may only remove one when it is the
// same on every rank and provably moves no data. Both patterns below hold on
// every rank because Loom programs are SPMD with static communicator sizes.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Coll/CollOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace loom::coll;

namespace {

/// Replaces a start + wait pair by its value when the collective is the
/// identity (one rank) or moves nothing (zero elements):
///
/// ```mlir
///   %f = coll.all_reduce_start %x on %c reduction = <sum>
///       : (tensor<8xf32>, !coll.comm<1>) -> !coll.future<tensor<8xf32>>
///   %y = coll.wait %f : !coll.future<tensor<8xf32>>
/// ```
/// becomes `%x`. Releases of the wait's result go too: after the fold the
/// value is the collective's input, which the release never owned. So do
/// releases of the input after the start: without the collective they
/// release nothing.
struct FoldTrivialCollective : public OpRewritePattern<WaitOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(WaitOp wait,
                                PatternRewriter &rewriter) const override {
    CollectiveOpInterface start = wait.getStart();
    if (!start)
      return rewriter.notifyMatchFailure(wait, "future has no start op");
    // A message is matched by the other side's receive or send: never drop
    // one side alone.
    if (start.isPointToPoint())
      return rewriter.notifyMatchFailure(wait, "point-to-point transfer");
    RankedTensorType resultType = wait.getResult().getType();
    Value replacement;
    if (start.getNumRanks() == 1) {
      replacement = start.getInput();
      if (replacement.getType() != resultType)
        replacement = tensor::CastOp::create(rewriter, wait.getLoc(),
                                             resultType, replacement);
    } else if (start.getInputBytes() == 0 && start.getResultBytes() == 0 &&
               resultType.hasStaticShape()) {
      replacement = tensor::EmptyOp::create(rewriter, wait.getLoc(),
                                            resultType.getShape(),
                                            resultType.getElementType());
    } else {
      return rewriter.notifyMatchFailure(
          wait, "collective spans several ranks and moves data");
    }
    for (Operation *user : llvm::make_early_inc_range(wait->getUsers()))
      if (isa<ReleaseOp>(user))
        rewriter.eraseOp(user);
    for (Operation *user :
         llvm::make_early_inc_range(start.getInput().getUsers()))
      if (isa<ReleaseOp>(user) && user->getBlock() == start->getBlock() &&
          start->isBeforeInBlock(user))
        rewriter.eraseOp(user);
    rewriter.replaceOp(wait, replacement);
    rewriter.eraseOp(start);
    return success();
  }
};

} // namespace

void WaitOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<FoldTrivialCollective>(context);
}
