//===- ConvertTrainToKernels.cpp - train ops as the runtime's kernels -----===//
//
// The one place a train op becomes a runtime kernel: the fused loss's rows
// (loomrt_cross_entropy_*, through the dialect's chunk loops and a
// LossRowKernels) and the embedding gradient's scatter-add
// (loomrt_embedding_grad_*). What a kernel does not take is left, with a
// remark, to train-decompose's target-free linalg.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Train/Decompositions.h"
#include "loom/Runtime/KernelDomains.h"
#include "loom/Runtime/Symbols.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace loom {
#define GEN_PASS_DEF_CONVERTTRAINTOKERNELSPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;
namespace symbols = loom::runtime::symbols;

namespace {

/// The runtime's fused-loss row kernels (CrossEntropy.cu and the host's).
class RuntimeLossKernels : public LossRowKernels {
public:
  /// The ignore_index the kernels compare i32 labels with. i32 labels keep
  /// the decomposition's (truncated) one; wider or narrower labels are
  /// mapped by labels(), to this when ignored.
  static int64_t kernelIgnore(const FusedLossShape &f, Value labels) {
    auto element = cast<RankedTensorType>(labels.getType()).getElementType();
    if (element.isInteger(32) ||
        (f.ignore >= INT32_MIN && f.ignore <= INT32_MAX))
      return static_cast<int32_t>(f.ignore);
    return INT32_MIN;
  }

  /// A chunk's labels as the kernels' i32: unchanged if i32; else compared
  /// in their own type as the decomposition does, an ignored label becomes
  /// kernelIgnore() and one outside [0, vocab) a negative value other than
  /// it (so no label wraps into the vocabulary).
  Value labels(OpBuilder &b, Location l, const FusedLossShape &f,
               Value labels) const override {
    LinalgBuilder lb(b, l);
    auto type = cast<RankedTensorType>(labels.getType());
    auto element = cast<IntegerType>(type.getElementType());
    if (element.isInteger(32))
      return labels;
    Type i32 = IntegerType::get(labels.getContext(), 32);
    unsigned width = element.getWidth();
    int64_t ignored = kernelIgnore(f, labels);
    int64_t outside = ignored == -1 ? -2 : -1;
    // Whether `vocab` is representable in the label type (else every
    // non-negative label is in range).
    bool vocabFits = width >= 64 || f.vocab <= (int64_t(1) << (width - 1)) - 1;
    return lb.generic(
        lb.empty(type.getShape(), i32), labels,
        {lb.identity(1), lb.identity(1)},
        [&](OpBuilder &ob, Location ol, ValueRange args) -> Value {
          Value label = args[0];
          auto constant = [&](Type t, int64_t v) -> Value {
            return arith::ConstantOp::create(ob, ol, ob.getIntegerAttr(t, v));
          };
          Value isIgnored =
              arith::CmpIOp::create(ob, ol, arith::CmpIPredicate::eq, label,
                                    constant(element, f.ignore));
          Value inRange = arith::CmpIOp::create(
              ob, ol, arith::CmpIPredicate::sge, label, constant(element, 0));
          if (vocabFits)
            inRange = arith::AndIOp::create(
                ob, ol, inRange,
                arith::CmpIOp::create(ob, ol, arith::CmpIPredicate::slt, label,
                                      constant(element, f.vocab)));
          Value narrowed =
              width < 32
                  ? arith::ExtSIOp::create(ob, ol, i32, label).getResult()
                  : arith::TruncIOp::create(ob, ol, i32, label).getResult();
          Value kept = arith::SelectOp::create(ob, ol, inRange, narrowed,
                                               constant(i32, outside));
          return arith::SelectOp::create(ob, ol, isIgnored,
                                         constant(i32, ignored), kept);
        });
  }

  std::pair<Value, Value> forward(OpBuilder &b, Location l,
                                  const FusedLossShape &f, Value logits,
                                  Value labels) const override {
    LinalgBuilder lb(b, l);
    auto row = RankedTensorType::get({f.chunk}, f.type);
    auto call = CallKernelOp::create(
        b, l, TypeRange{row, row},
        FlatSymbolRefAttr::get(b.getContext(), symbols::kCrossEntropyF32),
        ValueRange{logits, this->labels(b, l, f, labels)},
        ValueRange{lb.empty({f.chunk}, f.type), lb.empty({f.chunk}, f.type)},
        withSettings(lb, f,
                     {lb.i64Constant(f.chunk), lb.i64Constant(f.vocab),
                      lb.i64Constant(kernelIgnore(f, labels))}),
        /*read_outputs=*/nullptr);
    return {call.getResult(0), call.getResult(1)};
  }

  /// An f32 gradient overwrites the logits; a bf16 one is a new tensor (the
  /// logits die).
  Value backward(OpBuilder &b, Location l, const FusedLossShape &f,
                 Value logits, Value labels32, Value lse, Value weights,
                 Value offset, int64_t width, Type gemmType) const override {
    LinalgBuilder lb(b, l);
    Value column =
        offset ? arith::IndexCastOp::create(b, l, b.getI64Type(), offset)
                     .getResult()
               : lb.i64Constant(0);
    SmallVector<Value> scalars =
        withSettings(lb, f,
                     {lb.i64Constant(f.chunk), lb.i64Constant(width), column,
                      lb.i64Constant(f.vocab)});
    if (gemmType.isBF16()) {
      auto grad = RankedTensorType::get({f.chunk, width}, gemmType);
      return CallKernelOp::create(
                 b, l, TypeRange{grad},
                 FlatSymbolRefAttr::get(b.getContext(),
                                        symbols::kCrossEntropyGradBf16),
                 ValueRange{logits, labels32, lse, weights},
                 ValueRange{lb.empty({f.chunk, width}, gemmType)}, scalars,
                 /*read_outputs=*/nullptr)
          .getResult(0);
    }
    return CallKernelOp::create(
               b, l, TypeRange{logits.getType()},
               FlatSymbolRefAttr::get(b.getContext(),
                                      symbols::kCrossEntropyGradF32),
               ValueRange{labels32, lse, weights}, ValueRange{logits}, scalars,
               b.getDenseI64ArrayAttr({0}))
        .getResult(0);
  }

private:
  /// A kernel's scalars: `sizes`, then smoothing, z-loss and cap (f64, so
  /// that the kernels round their constants from the attributes' doubles).
  static SmallVector<Value> withSettings(LinalgBuilder &lb,
                                         const FusedLossShape &f,
                                         SmallVector<Value> sizes) {
    Type f64 = Float64Type::get(f.type.getContext());
    for (double setting : {f.smoothing, f.zLoss, f.softcap})
      sizes.push_back(lb.floatConstant(f64, setting));
    return sizes;
  }
};

/// Why the loss kernels do not take `op` (a train.linear_cross_entropy or
/// its gradient): a loss not computed in f32, a forward split in vocabulary
/// blocks, or with `cuda` a chunk outside the CUDA kernels' domain. "" when
/// they do, or when the decomposition itself will refuse `op` (it reports
/// that).
std::string lossKernelsRefusal(Operation *op, bool cuda) {
  FailureOr<FusedLossShape> f = failure();
  {
    // What the decomposition itself rejects, it reports.
    ScopedDiagnosticHandler quiet(op->getContext(),
                                  [](Diagnostic &) { return success(); });
    f = FusedLossShape::get(op);
  }
  if (failed(f))
    return "";
  if (!f->type.isF32()) {
    std::string type;
    llvm::raw_string_ostream os(type);
    os << f->type;
    return "the loss computes in " + type + ", the kernels in f32";
  }
  if (isa<LinearCrossEntropyOp>(op) && f->block < f->vocab)
    return "the forward runs in vocabulary blocks of " +
           std::to_string(f->block) + ", which the kernels do not take";
  if (cuda && !loom::runtime::cudaCrossEntropyTakes(f->chunk, f->vocab))
    return "chunks of " + std::to_string(f->chunk) + " rows by " +
           std::to_string(f->vocab) +
           " columns are outside the CUDA kernels' domain";
  return "";
}

/// Why the embedding kernel does not take `op` (ids other than i32, a table
/// other than f32 or bf16, dynamic shapes, or with `cuda` sizes outside the
/// CUDA kernel's domain), or "".
std::string embeddingKernelRefusal(EmbeddingGradOp op, bool cuda) {
  RankedTensorType resultType = op.getResult().getType();
  Type elementType = resultType.getElementType();
  if (!op.getIds().getType().hasStaticShape() || !resultType.hasStaticShape())
    return "the kernel takes static shapes";
  if (!op.getIds().getType().getElementType().isInteger(32))
    return "the kernel takes i32 ids";
  if (!(elementType.isF32() || elementType.isBF16()))
    return "the kernel takes an f32 or bf16 table";
  int64_t tokens = op.getIds().getType().getNumElements();
  if (cuda && !loom::runtime::cudaEmbeddingGradTakes(
                  tokens, resultType.getDimSize(0), resultType.getDimSize(1)))
    return std::to_string(tokens) +
           " tokens or a table this shape is outside the CUDA kernel's "
           "domain (at most 2^31 - 1 tokens, rows of at least 1 element)";
  return "";
}

/// `op` as one call of the runtime's scatter-add.
Value callEmbeddingKernel(EmbeddingGradOp op, OpBuilder &builder) {
  RankedTensorType resultType = op.getResult().getType();
  Type elementType = resultType.getElementType();
  Location loc = op.getLoc();
  LinalgBuilder lb(builder, loc);
  FlatTokens flat = flattenTokens(op, lb);
  int64_t tokens = flat.tokens;
  int64_t rows = resultType.getDimSize(0), width = resultType.getDimSize(1);
  Type f32 = builder.getF32Type();
  auto scratchType = RankedTensorType::get({tokens, width}, f32);
  auto call = CallKernelOp::create(
      builder, loc, TypeRange{resultType, scratchType},
      FlatSymbolRefAttr::get(builder.getContext(),
                             elementType.isF32() ? symbols::kEmbeddingGradF32
                                                 : symbols::kEmbeddingGradBf16),
      ValueRange{flat.ids, flat.grad},
      ValueRange{lb.empty(resultType.getShape(), elementType),
                 lb.empty({tokens, width}, f32)},
      ValueRange{lb.i64Constant(tokens), lb.i64Constant(rows),
                 lb.i64Constant(width)},
      /*read_outputs=*/nullptr);
  return call.getResult(0);
}

struct ConvertTrainToKernelsPass
    : public loom::impl::ConvertTrainToKernelsPassBase<
          ConvertTrainToKernelsPass> {
  using ConvertTrainToKernelsPassBase::ConvertTrainToKernelsPassBase;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation()->walk([&](Operation *op) {
      if ((lossKernels &&
           isa<LinearCrossEntropyOp, LinearCrossEntropyGradOp>(op)) ||
          (embeddingKernel && isa<EmbeddingGradOp>(op)))
        ops.push_back(op);
    });
    RuntimeLossKernels kernels;
    OpBuilder builder(&getContext());
    for (Operation *op : ops) {
      builder.setInsertionPoint(op);
      if (auto grad = dyn_cast<EmbeddingGradOp>(op)) {
        if (std::string why = embeddingKernelRefusal(grad, cuda);
            !why.empty()) {
          op->emitRemark() << "convert-train-to-kernels: embedding-kernel: "
                           << why << "; left to train-decompose";
          continue;
        }
        Value table = callEmbeddingKernel(grad, builder);
        grad.getResult().replaceAllUsesWith(table);
        op->erase();
        continue;
      }
      if (std::string why = lossKernelsRefusal(op, cuda); !why.empty()) {
        op->emitRemark() << "convert-train-to-kernels: loss-kernels: " << why
                         << "; left to train-decompose";
        continue;
      }
      FailureOr<SmallVector<Value>> replacements =
          decomposeFusedLoss(op, builder, &kernels);
      if (failed(replacements))
        return signalPassFailure();
      op->replaceAllUsesWith(*replacements);
      op->erase();
    }
  }
};

} // namespace
