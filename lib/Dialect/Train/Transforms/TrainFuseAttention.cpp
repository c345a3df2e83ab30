//===- FuseAttention.cpp - attention as runtime kernels, no scores --------===//
//
// train.attention and the train.attention_grad that reads the same query,
// key and value (the same values, or bit-identical recomputations of them
// as train-remat clones them) become calls of the runtime's fused attention
// kernels (train.call_kernel): the forward also returns each query row's
// log-sum-exp, which the backward takes with the output instead of
// recomputing them, and nothing of size seq x seq is ever held. The
// kernels come in f32 and bf16 (tensor cores on the CUDA target, head dims
// that are multiples of 8); other f16 and bf16 attention is widened to f32
// around each call.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "loom/Runtime/KernelDomains.h"
#include "loom/Runtime/Symbols.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace loom::train {
#define GEN_PASS_DEF_TRAINFUSEATTENTIONPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;
namespace symbols = loom::runtime::symbols;
using namespace loom::train;

namespace {

/// The kernels' element type for attention on `element` with head dim
/// `dim`: bf16 where the bf16 kernels take it, else f32 (widened around the
/// calls).
Type kernelType(Type element, int64_t dim) {
  if (element.isBF16() && dim % 8 == 0)
    return element;
  return Float32Type::get(element.getContext());
}

/// The runtime's entry points for kernels on `type`.
std::string forwardKernel(Type type) {
  return type.isBF16() ? symbols::kAttentionBf16 : symbols::kAttentionF32;
}
std::string backwardKernel(Type type) {
  return type.isBF16() ? symbols::kAttentionGradBf16
                       : symbols::kAttentionGradF32;
}

/// The kernels' scalars: batch, seq, heads, kv heads, head dim, causal,
/// scale.
SmallVector<Value> scalars(OpBuilder &b, Location loc, RankedTensorType query,
                           RankedTensorType key, bool causal, double scale) {
  SmallVector<Value> values;
  for (int64_t size :
       {query.getDimSize(0), query.getDimSize(1), query.getDimSize(2),
        key.getDimSize(2), query.getDimSize(3)})
    values.push_back(arith::ConstantIntOp::create(b, loc, size, 64));
  values.push_back(arith::ConstantIntOp::create(b, loc, causal, 32));
  values.push_back(arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(static_cast<float>(scale))));
  return values;
}

/// Why the kernels do not take this attention, or "": they take f32, bf16
/// or f16 (see kernelType) with equal query and key lengths (their one
/// `seq`), and on the CUDA target only the sizes of KernelDomains.h.
std::string refusal(RankedTensorType query, RankedTensorType key, bool cuda) {
  Type element = query.getElementType();
  if (!(element.isF32() || element.isBF16() || element.isF16()) ||
      key.getElementType() != element)
    return "the kernels take f32, bf16 or f16 attention";
  if (query.getDimSize(1) != key.getDimSize(1))
    return "the kernels take equal query and key lengths";
  if (!cuda)
    return "";
  int64_t dim = query.getDimSize(3);
  Type type = kernelType(element, dim);
  if (!loom::runtime::cudaAttentionTakesHeadDim(dim, type.isBF16()))
    return "head dim " + std::to_string(dim) +
           " is outside the CUDA kernels' (at most " +
           std::to_string(loom::runtime::kCudaAttentionMaxHeadDim) +
           ", a multiple of " +
           std::to_string(
               loom::runtime::cudaAttentionHeadDimMultiple(type.isBF16())) +
           (type.isBF16() ? " in bf16)" : " in f32)");
  if (!loom::runtime::cudaAttentionTakesGrid(
          query.getDimSize(0), query.getDimSize(1), query.getDimSize(2)))
    return "batch " + std::to_string(query.getDimSize(0)) + " x " +
           std::to_string(query.getDimSize(2)) +
           " heads exceeds the CUDA kernels' grid (65535)";
  return "";
}

/// `values` as tensors of `type` (elementwise arith.extf where narrower;
/// unchanged where they are `type` already, as the f32 lse is).
SmallVector<Value> converted(OpBuilder &b, Location loc, ValueRange values,
                             Type type) {
  loom::LinalgBuilder lb(b, loc);
  return llvm::map_to_vector(values,
                             [&](Value v) { return lb.convert(v, type); });
}

/// Whether two values hold the same bits: the same value, the same
/// parameter gathered twice (the wait of an identical all-gather start of
/// the same tensor), or the same result of equivalent pure ops whose
/// operands do, recursively. So a recomputation of a value, as train-remat
/// makes one, matches it, and its gradient may take the forward's
/// log-sum-exp. Region arguments match only as the corresponding arguments
/// of the regions being compared; answers are memoised.
class SameValues {
public:
  bool operator()(Value a, Value b) { return same(a, b, 0); }

private:
  bool same(Value a, Value b, unsigned depth) {
    if (a == b)
      return true;
    if (auto it = regionArgs.find(a); it != regionArgs.end())
      return it->second == b;
    auto ra = dyn_cast<OpResult>(a), rb = dyn_cast<OpResult>(b);
    if (!ra || !rb || depth > kMaxDepth ||
        ra.getResultNumber() != rb.getResultNumber() ||
        a.getType() != b.getType())
      return false;
    auto key = std::make_pair(a, b);
    if (auto it = memo.find(key); it != memo.end())
      return it->second;
    bool result = compare(ra.getOwner(), rb.getOwner(), depth);
    memo[key] = result;
    return result;
  }

  bool compare(Operation *x, Operation *y, unsigned depth) {
    if (x->getName().getStringRef() == "coll.wait" &&
        y->getName().getStringRef() == "coll.wait") {
      Operation *startX = x->getOperand(0).getDefiningOp();
      Operation *startY = y->getOperand(0).getDefiningOp();
      return startX && startY &&
             startX->getName().getStringRef() == "coll.all_gather_start" &&
             OperationEquivalence::isEquivalentTo(
                 startX, startY, OperationEquivalence::exactValueMatch, nullptr,
                 OperationEquivalence::IgnoreLocations);
    }
    if (!isPure(x) || !isPure(y))
      return false;
    return OperationEquivalence::isEquivalentTo(
        x, y, [&](Value u, Value v) { return success(same(u, v, depth + 1)); },
        [&](Value u, Value v) { regionArgs[u] = v; },
        OperationEquivalence::IgnoreLocations);
  }

  static constexpr unsigned kMaxDepth = 2048;
  DenseMap<std::pair<Value, Value>, bool> memo;
  /// Values inside the regions being compared, paired as they were.
  DenseMap<Value, Value> regionArgs;
};

struct FuseAttention
    : loom::train::impl::TrainFuseAttentionPassBase<FuseAttention> {
  using TrainFuseAttentionPassBase::TrainFuseAttentionPassBase;

  void runOnOperation() override {
    SmallVector<AttentionOp> forwards;
    getOperation().walk([&](AttentionOp op) { forwards.push_back(op); });
    // Each gradient's forward: the nearest one before it on the same
    // inputs, the very same values first (a forward that train-remat cloned
    // into the backward pairs with its clone, not with the original whose
    // output it chose to free).
    DenseMap<Operation *, Operation *> ownerOf;
    SameValues sameValue;
    getOperation().walk([&](AttentionGradOp grad) {
      AttentionOp exact, nearest;
      for (AttentionOp forward : forwards) {
        if (forward->getBlock() != grad->getBlock() ||
            !forward->isBeforeInBlock(grad) ||
            grad.getCausal() != forward.getCausal() ||
            grad.getScale() != forward.getScale() ||
            !refusal(cast<RankedTensorType>(forward.getQuery().getType()),
                     cast<RankedTensorType>(forward.getKey().getType()), cuda)
                 .empty())
          continue;
        if (forward.getQuery() == grad.getQuery() &&
            forward.getKey() == grad.getKey() &&
            forward.getValue() == grad.getValue())
          exact = forward;
        else if (sameValue(forward.getQuery(), grad.getQuery()) &&
                 sameValue(forward.getKey(), grad.getKey()) &&
                 sameValue(forward.getValue(), grad.getValue()))
          nearest = forward;
      }
      if (AttentionOp owner = exact ? exact : nearest)
        ownerOf[grad] = owner;
    });
    for (AttentionOp forward : forwards) {
      auto query = cast<RankedTensorType>(forward.getQuery().getType());
      auto key = cast<RankedTensorType>(forward.getKey().getType());
      if (std::string why = refusal(query, key, cuda); !why.empty()) {
        forward.emitRemark()
            << "train-fuse-attention: " << why << "; left to train-decompose";
        continue;
      }
      OpBuilder b(forward);
      Location loc = forward.getLoc();
      // Attention the kernels do not take in its own type is widened to
      // f32 around them (each call's copies live only across it).
      Type element = query.getElementType(), f32 = b.getF32Type();
      Type type = kernelType(element, query.getDimSize(3));
      if (type != element) {
        InFlightDiagnostic remark = forward.emitRemark()
                                    << "train-fuse-attention: ";
        if (element.isBF16())
          remark << "the bf16 kernels take head dims that are multiples of "
                    "8, not "
                 << query.getDimSize(3);
        else
          remark << "the kernels have no " << element << " variant";
        remark << "; widened to f32 around the calls";
      }
      RankedTensorType queryK = query.clone(type), keyK = key.clone(type);
      auto lseType = RankedTensorType::get(
          {query.getDimSize(0), query.getDimSize(2), query.getDimSize(1)}, f32);
      bool causal = forward.getCausal();
      double scale = forward.getScale().convertToDouble();
      auto fused = CallKernelOp::create(
          b, loc, TypeRange{queryK, lseType}, forwardKernel(type),
          converted(b, loc,
                    {forward.getQuery(), forward.getKey(), forward.getValue()},
                    type),
          ValueRange{tensor::EmptyOp::create(b, loc, query.getShape(), type),
                     tensor::EmptyOp::create(b, loc, lseType.getShape(), f32)},
          scalars(b, loc, query, key, causal, scale),
          /*read_outputs=*/nullptr);
      Value out = loom::LinalgBuilder(b, loc).convert(fused.getResult(0),
                                                      element),
            lse = fused.getResult(1);
      // Its gradients.
      SmallVector<AttentionGradOp> grads;
      for (auto [grad, owner] : ownerOf)
        if (owner == forward.getOperation())
          grads.push_back(cast<AttentionGradOp>(grad));
      llvm::sort(grads, [](AttentionGradOp x, AttentionGradOp y) {
        return x->isBeforeInBlock(y);
      });
      for (AttentionGradOp grad : grads) {
        b.setInsertionPoint(grad);
        Location gradLoc = grad.getLoc();
        auto empty = [&](RankedTensorType type) -> Value {
          return tensor::EmptyOp::create(b, gradLoc, type.getShape(),
                                         type.getElementType());
        };
        SmallVector<Value> ins = converted(
            b, gradLoc, {grad.getQuery(), grad.getKey(), grad.getValue(), out},
            type);
        ins.push_back(lse);
        ins.push_back(loom::LinalgBuilder(b, gradLoc)
                          .convert(grad.getResultGrad(), type));
        auto fusedGrad = CallKernelOp::create(
            b, gradLoc, TypeRange{queryK, keyK, keyK, lseType},
            backwardKernel(type), ins,
            ValueRange{empty(queryK), empty(keyK), empty(keyK), empty(lseType)},
            scalars(b, gradLoc, query, key, causal, scale),
            /*read_outputs=*/nullptr);
        loom::LinalgBuilder lb(b, gradLoc);
        grad.replaceAllUsesWith(llvm::map_to_vector(
            fusedGrad.getResults().take_front(3),
            [&](Value g) { return lb.convert(g, element); }));
        grad.erase();
      }
      forward.replaceAllUsesWith(out);
      forward.erase();
    }
  }
};

} // namespace
