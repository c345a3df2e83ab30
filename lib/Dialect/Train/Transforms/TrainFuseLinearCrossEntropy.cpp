//===- FuseLinearCrossEntropy.cpp - projection + loss, without logits -----===//
//
// Matches `linalg.matmul(hidden, weightᵀ) -> train.cross_entropy` and, in a
// training step, the backward chain of those logits, and rewrites them to
// train.linear_cross_entropy and its gradient (see the pass description).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

namespace loom::train {
#define GEN_PASS_DEF_TRAINFUSELINEARCROSSENTROPYPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;
using namespace loom::train;

namespace {

/// Whether `value` is a tensor filled with zeros (a linalg.fill of 0).
bool isZeroFill(Value value) {
  auto fill = value.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

/// The `[vocab]` bias when `value` broadcasts one over the tokens (a
/// linalg.broadcast along dimension 0, or the generic equivalent), else null.
Value biasOf(Value value) {
  if (auto broadcast = value.getDefiningOp<linalg::BroadcastOp>()) {
    if (broadcast.getDimensions() == ArrayRef<int64_t>{0})
      return broadcast.getInput();
    return {};
  }
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getNumLoops() != 2 ||
      generic.getNumReductionLoops() != 0)
    return {};
  MLIRContext *ctx = generic.getContext();
  if (generic.getIndexingMapsArray() !=
      SmallVector<AffineMap>{AffineMap::get(2, 0, getAffineDimExpr(1, ctx)),
                             AffineMap::getMultiDimIdentityMap(2, ctx)})
    return {};
  auto yield = cast<linalg::YieldOp>(generic.getBody()->getTerminator());
  if (yield.getValues()[0] != generic.getBody()->getArgument(0))
    return {};
  return generic.getDpsInputs()[0];
}


enum class Role { HiddenGrad, WeightGrad, BiasGrad };

/// Whether `op` is `dbias(n) += sum_m dlogits(m, n)`.
bool isBiasGrad(linalg::LinalgOp op, Value dlogits) {
  if (!op || !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 || op.getNumLoops() != 2 ||
      op.getNumReductionLoops() != 1 || op.getDpsInputs()[0] != dlogits)
    return false;
  MLIRContext *ctx = op.getContext();
  if (op.getIndexingMapsArray() !=
      SmallVector<AffineMap>{AffineMap::getMultiDimIdentityMap(2, ctx),
                             AffineMap::get(2, 0, getAffineDimExpr(1, ctx))})
    return false;
  Block *body = op.getBlock();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield.getValues()[0].getDefiningOp<arith::AddFOp>();
  if (!add || body->getOperations().size() != 2)
    return false;
  Value in = body->getArgument(0), out = body->getArgument(1);
  return (add.getLhs() == in && add.getRhs() == out) ||
         (add.getLhs() == out && add.getRhs() == in);
}

/// Whether `op` is `dhidden(m, k) += dlogits(m, n) weight(n, k)`,
/// `dweight(n, k) += dlogits(m, n) hidden(m, k)` or (with a bias) the bias's
/// gradient.
std::optional<Role> classify(Operation *user, Value dlogits, Value hidden,
                             Value weight, Value bias) {
  auto op = dyn_cast<linalg::LinalgOp>(user);
  // Each gradient must have its parameter's type, as the fused op's does.
  auto hasTypeOf = [&](Value value) {
    return op->getResult(0).getType() == value.getType();
  };
  if (bias && isBiasGrad(op, dlogits))
    return hasTypeOf(bias) ? std::optional(Role::BiasGrad) : std::nullopt;
  if (!op || !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op.getNumLoops() != 3 ||
      op.getNumReductionLoops() != 1 ||
      !linalg::isaContractionOpInterface(op))
    return std::nullopt;
  OpOperand *a = op.getDpsInputOperand(0), *b = op.getDpsInputOperand(1);
  if (b->get() == dlogits)
    std::swap(a, b);
  if (a->get() != dlogits || b->get() == dlogits)
    return std::nullopt;
  AffineMap mapA = op.getMatchingIndexingMap(a);
  AffineMap mapB = op.getMatchingIndexingMap(b);
  AffineMap mapC = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  for (AffineMap map : {mapA, mapB, mapC})
    if (map.getNumResults() != 2 || !map.isProjectedPermutation())
      return std::nullopt;
  // The reduction is the dimension the output does not read.
  if (b->get() == weight && mapA.getDimPosition(0) == mapC.getDimPosition(0) &&
      mapA.getDimPosition(1) == mapB.getDimPosition(0) && mapB.getDimPosition(1) == mapC.getDimPosition(1) &&
      hasTypeOf(hidden))
    return Role::HiddenGrad;
  if (b->get() == hidden && mapA.getDimPosition(1) == mapC.getDimPosition(0) &&
      mapA.getDimPosition(0) == mapB.getDimPosition(0) && mapB.getDimPosition(1) == mapC.getDimPosition(1) &&
      hasTypeOf(weight))
    return Role::WeightGrad;
  return std::nullopt;
}

/// One fusable projection + loss, with its backward if it has one.
struct Match {
  linalg::MatmulOp matmul;
  Value bias;
  CrossEntropyOp loss;
  CrossEntropyGradOp grad;
  SmallVector<std::pair<linalg::LinalgOp, Role>> contractions;
};

/// Matches `loss`, or returns why it cannot be fused.
FailureOr<Match> match(CrossEntropyOp loss, int64_t chunkTokens,
                       int64_t chunkVocab, std::string &why) {
  Match m;
  m.loss = loss;
  m.matmul = loss.getLogits().getDefiningOp<linalg::MatmulOp>();
  if (!m.matmul || !m.matmul.hasPureTensorSemantics()) {
    why = "the logits are not a linalg.matmul on tensors";
    return failure();
  }
  MLIRContext *ctx = loss.getContext();
  AffineExpr mm, n, k;
  bindDims(ctx, mm, n, k);
  SmallVector<AffineMap> transposedB = {
      AffineMap::get(3, 0, {mm, k}, ctx), AffineMap::get(3, 0, {n, k}, ctx),
      AffineMap::get(3, 0, {mm, n}, ctx)};
  if (m.matmul.getIndexingMapsArray() != transposedB) {
    why = "the projection's weight is not [vocab, hidden] (the matmul is "
          "not hidden @ weightᵀ)";
    return failure();
  }
  Value init = m.matmul.getDpsInits()[0];
  m.bias = biasOf(init);
  if (!isZeroFill(init) && !m.bias) {
    why = "the projection accumulates into something other than zeros or "
          "a bias broadcast over the tokens";
    return failure();
  }
  Value hidden = m.matmul.getInputs()[0], weight = m.matmul.getInputs()[1];
  if (!cast<RankedTensorType>(hidden.getType()).hasStaticShape() ||
      !cast<RankedTensorType>(weight.getType()).hasStaticShape()) {
    why = "the projection has dynamic shapes (the fused loss's chunks "
          "need static ones)";
    return failure();
  }
  auto logitsType = loss.getLogits().getType();
  int64_t tokens = logitsType.getDimSize(0), vocab = logitsType.getDimSize(1);
  if (chunkTokens >= tokens && (chunkVocab == 0 || chunkVocab >= vocab)) {
    why = "one chunk of " + std::to_string(chunkTokens) +
          " tokens would hold all the logits (nothing to save)";
    return failure();
  }
  // The operands share one type; the logits have it too, or are f32 over
  // bf16/f16 operands (mixed precision: the fused loss computes in f32).
  Type element = cast<RankedTensorType>(hidden.getType()).getElementType();
  Type logitsElement = logitsType.getElementType();
  if (cast<RankedTensorType>(weight.getType()).getElementType() != element ||
      (m.bias &&
       cast<RankedTensorType>(m.bias.getType()).getElementType() != element) ||
      (logitsElement != element &&
       !(logitsElement.isF32() && element.getIntOrFloatBitWidth() < 32))) {
    why = "the projection mixes element types";
    return failure();
  }
  for (Operation *user : loss.getLogits().getUsers()) {
    if (user == loss)
      continue;
    auto grad = dyn_cast<CrossEntropyGradOp>(user);
    // The gradient op reads the fused op's log-sum-exp: it must follow the
    // loss in its block.
    if (!grad || m.grad || grad->getBlock() != loss->getBlock() ||
        !loss->isBeforeInBlock(grad) || grad.getLabels() != loss.getLabels() ||
        grad.getIgnoreIndexAttr() != loss.getIgnoreIndexAttr() ||
        grad.getReductionAttr() != loss.getReductionAttr() ||
        grad.getLabelSmoothingAttr() != loss.getLabelSmoothingAttr() ||
        grad.getZLossAttr() != loss.getZLossAttr()) {
      why = "the logits have another use than the loss and its gradient";
      return failure();
    }
    m.grad = grad;
  }
  if (!m.grad)
    return m;
  bool seen[3] = {false, false, false};
  for (Operation *user : m.grad.getResult().getUsers()) {
    std::optional<Role> role =
        classify(user, m.grad.getResult(), hidden, weight, m.bias);
    if (!role || seen[int(*role)]) {
      why = "the logits' gradient is used by something other than the "
            "dhidden, dweight and dbias reductions";
      return failure();
    }
    seen[int(*role)] = true;
    m.contractions.push_back({cast<linalg::LinalgOp>(user), *role});
  }
  return m;
}

void rewrite(Match &m, int64_t chunkTokens, int64_t chunkVocab) {
  OpBuilder b(m.loss);
  Location loc = m.loss.getLoc();
  Value hidden = m.matmul.getInputs()[0], weight = m.matmul.getInputs()[1];
  auto hiddenType = cast<RankedTensorType>(hidden.getType());
  // The fused loss computes f16/bf16 in f32 and returns f32: convert at the
  // boundary so the step's types do not change.
  Type element = hiddenType.getElementType();
  Type compute = element.getIntOrFloatBitWidth() < 32 ? b.getF32Type() : element;
  auto lossType = m.loss.getType().clone(compute);
  auto lseType = RankedTensorType::get({hiddenType.getDimSize(0)}, compute);
  auto fused = LinearCrossEntropyOp::create(
      b, loc, lossType, lseType, hidden, weight, m.bias, m.loss.getLabels(),
      m.loss.getIgnoreIndexAttr(), m.loss.getReductionAttr(),
      m.loss.getLabelSmoothingAttr(), m.loss.getZLossAttr(),
      b.getF64FloatAttr(0.0), b.getI64IntegerAttr(chunkTokens),
      b.getI64IntegerAttr(chunkVocab));
  m.loss.getResult().replaceAllUsesWith(loom::LinalgBuilder(b, loc).convert(
      fused.getLoss(), m.loss.getType().getElementType()));
  m.loss.erase();
  if (m.grad) {
    b.setInsertionPoint(m.grad);
    Value lossGrad =
        loom::LinalgBuilder(b, m.grad.getLoc())
            .convert(m.grad.getLossGrad(), lossType.getElementType());
    auto grads = LinearCrossEntropyGradOp::create(
        b, m.grad.getLoc(), hidden, weight, m.grad.getLabels(), fused.getLse(),
        lossGrad, fused);
    for (auto [op, role] : m.contractions) {
      Value value = role == Role::HiddenGrad   ? grads.getHiddenGrad()
                    : role == Role::WeightGrad ? grads.getWeightGrad()
                                               : grads.getBiasGrad();
      Value init = op.getDpsInits()[0];
      if (!isZeroFill(init)) {
        // The contraction accumulated into an earlier gradient.
        b.setInsertionPoint(op);
        auto type = cast<RankedTensorType>(init.getType());
        Value empty = tensor::EmptyOp::create(b, op.getLoc(), type.getShape(),
                                              type.getElementType());
        value = linalg::AddOp::create(b, op.getLoc(), ValueRange{init, value},
                                      ValueRange{empty})
                    .getResult(0);
      }
      op->getResult(0).replaceAllUsesWith(value);
      op->erase();
    }
    m.grad.erase();
  }
  m.matmul.erase();
}

struct TrainFuseLinearCrossEntropyPass
    : loom::train::impl::TrainFuseLinearCrossEntropyPassBase<
          TrainFuseLinearCrossEntropyPass> {
  using Base::Base;

  void runOnOperation() override {
    if (chunkTokens <= 0 || chunkVocab < 0) {
      getOperation().emitError(
          "chunk-tokens must be positive and chunk-vocab not negative");
      return signalPassFailure();
    }
    SmallVector<CrossEntropyOp> losses;
    getOperation().walk([&](CrossEntropyOp loss) { losses.push_back(loss); });
    for (CrossEntropyOp loss : losses) {
      std::string why;
      FailureOr<Match> m = match(loss, chunkTokens, chunkVocab, why);
      if (failed(m)) {
        if (remarks)
          loss.emitRemark("not fused: ") << why;
        continue;
      }
      rewrite(*m, chunkTokens, chunkVocab);
    }
  }
};

} // namespace
