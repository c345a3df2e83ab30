//===- FuseElementwise.cpp - elementwise fusion that leaves GEMMs to BLAS -===//
//
// Upstream's elementwise fusion and reshape propagation, minus anything
// that would turn a contraction convert-linalg-to-blas takes into one it
// cannot. A fused op's location holds both ops' (and so both op ids, for
// the profile: trainer-stamp-op-ids).
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/GPU/Passes.h"
#include "loom/Codegen/Utils/GemmMatch.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace loom::codegen {
#define GEN_PASS_DEF_GPUFUSEELEMENTWISEPASS
#include "loom/Codegen/GPU/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

/// Whether `op` is a contraction BLAS runs (a multiply-accumulate with a
/// reduction loop).
bool isGemm(Operation *op) {
  auto linalgOp = dyn_cast_if_present<linalg::LinalgOp>(op);
  return linalgOp && linalgOp.getNumReductionLoops() > 0 &&
         loom::codegen::mulAddAlpha(linalgOp).has_value();
}

/// Whether a value `producer` reads is released (coll.release, ZeRO-3's
/// gathered parameters) between it and `consumer`: fused, the producer's
/// reads would move past the release.
bool releasedBefore(Operation *producer, Operation *consumer) {
  Block *block = producer->getBlock();
  Operation *at = block->findAncestorOpInBlock(*consumer);
  if (!at)
    return true;
  for (Value operand : producer->getOperands())
    for (Operation *user : operand.getUsers())
      if (isa<loom::coll::ReleaseOp>(user) && user->getBlock() == block &&
          producer->isBeforeInBlock(user) && user->isBeforeInBlock(at))
        return true;
  return false;
}

/// Fuse, or fold a reshape, across `operand` only if neither its user nor
/// its producer is a GEMM, the producer has no other user, and nothing it
/// reads is released before the user.
bool allowFusion(OpOperand *operand) {
  Operation *producer = operand->get().getDefiningOp();
  Operation *consumer = operand->getOwner();
  return producer && producer->hasOneUse() && !isGemm(producer) &&
         !isGemm(consumer) && !releasedBefore(producer, consumer);
}

/// Upstream's FuseElementwiseOps, but the fused op is located at the
/// consumer and the producer both (upstream keeps the consumer's alone, and
/// a profile would charge the producer's work to the consumer's id).
struct FuseKeepingLocations
    : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp consumer,
                                PatternRewriter &rewriter) const override {
    for (OpOperand &operand : consumer->getOpOperands()) {
      if (!linalg::areElementwiseOpsFusable(&operand) || !allowFusion(&operand))
        continue;
      Operation *producer = operand.get().getDefiningOp();
      FailureOr<linalg::ElementwiseOpFusionResult> fused =
          linalg::fuseElementwiseOps(rewriter, &operand);
      if (failed(fused))
        return rewriter.notifyMatchFailure(consumer, "fusion failed");
      fused->fusedOp->setLoc(
          rewriter.getFusedLoc({consumer.getLoc(), producer->getLoc()}));
      // The consumer's results (the producer's stay its own).
      for (auto [original, replacement] : fused->replacements)
        rewriter.replaceUsesWithIf(original, replacement, [&](OpOperand &use) {
          return use.get().getDefiningOp() != producer;
        });
      rewriter.eraseOp(consumer);
      return success();
    }
    return failure();
  }
};

struct GpuFuseElementwisePass
    : loom::codegen::impl::GpuFuseElementwisePassBase<GpuFuseElementwisePass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    // Before upstream's own fusion pattern, which then never finds a match
    // this one missed.
    patterns.add<FuseKeepingLocations>(context, /*benefit=*/2);
    linalg::populateElementwiseOpsFusionPatterns(patterns, allowFusion);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, allowFusion);
    tensor::populateBubbleUpExpandShapePatterns(patterns);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
    context->getLoadedDialect<linalg::LinalgDialect>()
        ->getCanonicalizationPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
