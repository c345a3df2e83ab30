//===- TrainOps.cpp - train operations and their verifiers ----------------===//

#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom::train;

#include "loom/Dialect/Train/TrainEnums.cpp.inc"
#include "loom/Dialect/Train/TrainInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "loom/Dialect/Train/TrainOps.cpp.inc"

/// Checks that two static dimensions agree, naming both.
static LogicalResult verifyDim(Operation *op, int64_t expected, int64_t actual,
                               const Twine &what) {
  if (ShapedType::isDynamic(expected) || ShapedType::isDynamic(actual) ||
      expected == actual)
    return success();
  return op->emitOpError() << "expected " << what << " to be " << expected
                           << ", got " << actual;
}

static LogicalResult verifySameElementType(Operation *op, Type expected,
                                           Type actual, StringRef what) {
  if (expected == actual)
    return success();
  return op->emitOpError() << "expected " << what << " element type "
                           << expected << ", got " << actual;
}

static LogicalResult verifyRank(Operation *op, RankedTensorType type,
                                int64_t rank, StringRef what) {
  if (type.getRank() == rank)
    return success();
  return op->emitOpError() << "expected " << what << " of rank " << rank
                           << ", got " << type;
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

/// `rows` is `[ids..., dim]`: checks it against the ids and the row width.
static LogicalResult verifyRowsMatchIds(Operation *op, RankedTensorType rows,
                                        RankedTensorType ids, int64_t dim,
                                        StringRef what) {
  if (ids.getRank() < 1)
    return op->emitOpError() << "expected ids of rank >= 1, got " << ids;
  if (rows.getRank() != ids.getRank() + 1)
    return op->emitOpError()
           << "expected " << what << " of rank " << ids.getRank() + 1
           << " (the ids' rank + 1), got " << rows;
  for (int64_t i = 0; i < ids.getRank(); ++i)
    if (failed(verifyDim(op, ids.getDimSize(i), rows.getDimSize(i),
                         what + " dimension " + Twine(i) + " (the ids')")))
      return failure();
  return verifyDim(op, dim, rows.getDimSize(ids.getRank()),
                   what + " last dimension (the table width)");
}

LogicalResult EmbeddingOp::verify() {
  RankedTensorType table = getTable().getType();
  if (failed(verifyRank(*this, table, 2, "a table")))
    return failure();
  if (failed(verifySameElementType(*this, table.getElementType(),
                                   getResult().getType().getElementType(),
                                   "result")))
    return failure();
  return verifyRowsMatchIds(*this, getResult().getType(), getIds().getType(),
                            table.getDimSize(1), "result");
}

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType result = getResult().getType();
  if (failed(verifyRank(*this, result, 2, "a table-shaped result")))
    return failure();
  if (failed(verifySameElementType(*this, getGrad().getType().getElementType(),
                                   result.getElementType(), "result")))
    return failure();
  return verifyRowsMatchIds(*this, getGrad().getType(), getIds().getType(),
                            result.getDimSize(1), "grad");
}

//===----------------------------------------------------------------------===//
// RMSNorm and RoPE
//===----------------------------------------------------------------------===//

LogicalResult RMSNormOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType weight = getWeight().getType();
  if (input.getRank() < 1)
    return emitOpError() << "expected an input of rank >= 1, got " << input;
  if (failed(verifyRank(*this, weight, 1, "a weight")) ||
      failed(verifySameElementType(*this, input.getElementType(),
                                   weight.getElementType(), "weight")))
    return failure();
  return verifyDim(*this, input.getDimSize(input.getRank() - 1),
                   weight.getDimSize(0),
                   "the weight size (the input's last "
                   "dimension)");
}

LogicalResult RoPEOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(
          verifyRank(*this, input, 4, "[batch, seq, heads, head_dim] input")))
    return failure();
  int64_t headDim = input.getDimSize(3);
  if (ShapedType::isDynamic(headDim) || headDim % 2 != 0)
    return emitOpError() << "expected a static, even head_dim, got " << input;
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Checks query `[b, s, h, d]` against key/value `[b, t, kv, d]`.
static LogicalResult verifyAttentionShapes(Operation *op,
                                           RankedTensorType query,
                                           RankedTensorType key, bool causal) {
  if (failed(verifyRank(op, query, 4, "[batch, seq, heads, head_dim] query")) ||
      failed(verifyRank(op, key, 4, "[batch, seq, kv_heads, head_dim] key")) ||
      failed(verifySameElementType(op, query.getElementType(),
                                   key.getElementType(), "key")) ||
      failed(verifyDim(op, query.getDimSize(0), key.getDimSize(0),
                       "the key batch (the query's)")) ||
      failed(verifyDim(op, query.getDimSize(3), key.getDimSize(3),
                       "the key head_dim (the query's)")))
    return failure();
  if (causal && failed(verifyDim(op, query.getDimSize(1), key.getDimSize(1),
                                 "the key sequence length of causal "
                                 "attention (the query's)")))
    return failure();
  int64_t heads = query.getDimSize(2), kvHeads = key.getDimSize(2);
  if (!query.hasStaticShape() || !key.hasStaticShape())
    return op->emitOpError()
           << "expected static shapes, got " << query << " and " << key;
  if (heads < 1 || kvHeads < 1 || query.getDimSize(3) < 1)
    return op->emitOpError()
           << "expected at least one query head, kv head and head_dim "
              "element, got "
           << query << " and " << key;
  if (heads % kvHeads != 0)
    return op->emitOpError()
           << "expected the query heads (" << heads
           << ") to be a multiple of the kv heads (" << kvHeads << ")";
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifyAttentionShapes(*this, getQuery().getType(), getKey().getType(),
                               getCausal());
}

LogicalResult AttentionGradOp::verify() {
  return verifyAttentionShapes(*this, getQuery().getType(), getKey().getType(),
                               getCausal());
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

/// Checks `[tokens, vocab]` logits against `[tokens]` labels and returns the
/// loss type the reduction gives, or null after an error.
static RankedTensorType verifyCrossEntropyOperands(Operation *op,
                                                   RankedTensorType logits,
                                                   RankedTensorType labels,
                                                   LossReduction reduction) {
  if (failed(verifyRank(op, logits, 2, "[tokens, vocab] logits")) ||
      failed(verifyRank(op, labels, 1, "[tokens] labels")) ||
      failed(verifyDim(op, logits.getDimSize(0), labels.getDimSize(0),
                       "the number of labels (the logits' tokens)")))
    return {};
  if (reduction == LossReduction::None)
    return RankedTensorType::get({logits.getDimSize(0)},
                                 logits.getElementType());
  return RankedTensorType::get({}, logits.getElementType());
}

LogicalResult CrossEntropyOp::verify() {
  RankedTensorType expected = verifyCrossEntropyOperands(
      *this, getLogits().getType(), getLabels().getType(), getReduction());
  if (!expected)
    return failure();
  if (getResult().getType() != expected)
    return emitOpError() << "expected result type " << expected
                         << " for reduction "
                         << stringifyLossReduction(getReduction()) << ", got "
                         << getResult().getType();
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  RankedTensorType expected = verifyCrossEntropyOperands(
      *this, getLogits().getType(), getLabels().getType(), getReduction());
  if (!expected)
    return failure();
  if (getLossGrad().getType() != expected)
    return emitOpError() << "expected loss_grad type " << expected
                         << " for reduction "
                         << stringifyLossReduction(getReduction()) << ", got "
                         << getLossGrad().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Fused linear + cross-entropy
//===----------------------------------------------------------------------===//

/// Checks `[tokens, hidden]` hidden states, a `[vocab, hidden]` weight of
/// the same element type and `[tokens]` labels. Returns the loss type the
/// reduction gives (f32 for narrower floats) and sets `lseType`, or null
/// after an error.
static RankedTensorType verifyLinearCrossEntropyOperands(
    Operation *op, RankedTensorType hidden, RankedTensorType weight,
    Value bias, RankedTensorType labels, LossReduction reduction,
    RankedTensorType &lseType) {
  if (failed(verifyRank(op, hidden, 2, "[tokens, hidden] hidden states")) ||
      failed(verifyRank(op, weight, 2, "[vocab, hidden] weight")) ||
      failed(verifyRank(op, labels, 1, "[tokens] labels")) ||
      failed(verifyDim(op, hidden.getDimSize(1), weight.getDimSize(1),
                       "the weight's hidden size (dimension 1)")) ||
      failed(verifyDim(op, hidden.getDimSize(0), labels.getDimSize(0),
                       "the number of labels (the hidden states' tokens)")) ||
      failed(verifySameElementType(op, hidden.getElementType(),
                                   weight.getElementType(), "weight")))
    return {};
  if (bias) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (failed(verifyRank(op, biasType, 1, "[vocab] bias")) ||
        failed(verifyDim(op, weight.getDimSize(0), biasType.getDimSize(0),
                         "the bias size (the weight's vocabulary)")) ||
        failed(verifySameElementType(op, weight.getElementType(),
                                     biasType.getElementType(), "bias")))
      return {};
  }
  Type element = hidden.getElementType();
  if (element.getIntOrFloatBitWidth() < 32)
    element = Float32Type::get(op->getContext());
  lseType = RankedTensorType::get({hidden.getDimSize(0)}, element);
  if (reduction == LossReduction::None)
    return lseType;
  return RankedTensorType::get({}, element);
}

/// Checks the operands of the fused op or its gradient, and that `loss`
/// (the loss, or the incoming loss gradient, named `what`) and the
/// log-sum-exp have the types the reduction gives.
template <typename OpTy>
static LogicalResult verifyLinearCrossEntropy(OpTy op, Type loss,
                                              StringRef what) {
  RankedTensorType lseType;
  RankedTensorType expected = verifyLinearCrossEntropyOperands(
      op, op.getHidden().getType(), op.getWeight().getType(), op.getBias(),
      op.getLabels().getType(), op.getReduction(), lseType);
  if (!expected)
    return failure();
  if (loss != expected)
    return op.emitOpError() << "expected " << what << " type " << expected
                            << " for reduction "
                            << stringifyLossReduction(op.getReduction())
                            << ", got " << loss;
  if (op.getLse().getType() != lseType)
    return op.emitOpError() << "expected lse type " << lseType << ", got "
                            << op.getLse().getType();
  return success();
}

LogicalResult LinearCrossEntropyOp::verify() {
  return verifyLinearCrossEntropy(*this, getLoss().getType(), "loss");
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (failed(verifyLinearCrossEntropy(*this, getLossGrad().getType(),
                                      "loss_grad")))
    return failure();
  if (bool(getBias()) != bool(getBiasGrad()) ||
      (getBias() && getBias().getType() != getBiasGrad().getType()))
    return emitOpError("expects a bias gradient of the bias's type exactly "
                       "when there is a bias");
  return success();
}

//===----------------------------------------------------------------------===//
// Runtime kernels
//===----------------------------------------------------------------------===//

LogicalResult CallKernelOp::verify() {
  if (getOutputs().empty())
    return emitOpError("needs at least one output");
  if (std::optional<ArrayRef<int64_t>> read = getReadOutputs()) {
    for (auto [i, index] : llvm::enumerate(*read))
      if (index < 0 || index >= int64_t(getOutputs().size()) ||
          (i > 0 && index <= (*read)[i - 1]))
        return emitOpError("read_outputs must list output indices in "
                           "increasing order, each below ")
               << getOutputs().size();
  }
  bool tensors = isa<RankedTensorType>(getOutputs().front().getType());
  for (Value operand : getOperation()->getOperands().take_front(
           getInputs().size() + getOutputs().size()))
    if (isa<RankedTensorType>(operand.getType()) != tensors ||
        (!tensors && !isa<MemRefType>(operand.getType())))
      return emitOpError("takes ranked tensors only or memrefs only");
  if (!tensors)
    return getResults().empty()
               ? success()
               : emitOpError("returns nothing on memrefs");
  if (getResultTypes() != getOutputs().getTypes())
    return emitOpError("must return one value of each output's type");
  return success();
}

Speculation::Speculatability CallKernelOp::getSpeculatability() {
  // On tensors a kernel's results are a function of its operands, as a
  // linalg op's are (its effects are on buffers only).
  return hasPureTensorSemantics() ? Speculation::Speculatable
                                  : Speculation::NotSpeculatable;
}

void CallKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &input : getInputsMutable())
    if (isa<MemRefType>(input.get().getType()))
      effects.emplace_back(MemoryEffects::Read::get(), &input,
                           SideEffects::DefaultResource::get());
  for (OpOperand &output : getOutputsMutable()) {
    if (!isa<MemRefType>(output.get().getType()))
      continue;
    if (readsOutput(output.getOperandNumber() - getInputs().size()))
      effects.emplace_back(MemoryEffects::Read::get(), &output,
                           SideEffects::DefaultResource::get());
    effects.emplace_back(MemoryEffects::Write::get(), &output,
                         SideEffects::DefaultResource::get());
  }
}
