//===- WidenCompute.cpp - bf16/f16 generics compute in f32 ----------------===//
//
// A bf16 tensor holds 8 significant bits; a sum of 768 squares or 2,048
// probabilities accumulated in bf16 loses most of them. Each generic that
// touches a 16-bit float is rebuilt to compute in f32: arguments extended,
// body ops retyped, the yield rounded; reductions accumulate into f32
// tensors that are rounded once, and consumers of a rounded reduction read
// the f32 tensor instead. Contractions are left to BLAS, whose bf16 GEMMs
// accumulate in f32; one that mixes an f32 operand into a bf16 result
// rounds that operand first, so that BLAS takes it.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Common/Passes.h"
#include "loom/Codegen/Utils/GemmMatch.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

namespace loom::codegen {
#define GEN_PASS_DEF_CODEGENWIDENCOMPUTEPASS
#include "loom/Codegen/Common/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

bool isNarrowFloat(Type type) {
  auto f = dyn_cast<FloatType>(getElementTypeOrSelf(type));
  return f && f.getWidth() < 32;
}

/// Whether the body can be retyped: arith and math ops (no bit casts of
/// narrow floats), linalg.index and the yield.
bool bodyIsRetypable(Block &body) {
  for (Operation &op : body) {
    if (isa<linalg::YieldOp, linalg::IndexOp>(op))
      continue;
    StringRef dialect = op.getName().getDialectNamespace();
    if (dialect != "arith" && dialect != "math")
      return false;
    if (auto constant = dyn_cast<arith::ConstantOp>(op);
        constant && isNarrowFloat(constant.getType()) &&
        !isa<FloatAttr>(constant.getValue()))
      return false;
    if (isa<arith::BitcastOp>(op) &&
        (isNarrowFloat(op.getOperand(0).getType()) ||
         isNarrowFloat(op.getResult(0).getType())))
      return false;
  }
  return true;
}

/// Whether `op` touches a narrow float: an operand, a body argument or a
/// value computed in the body.
bool touchesNarrowFloat(linalg::GenericOp op) {
  if (llvm::any_of(op->getOperandTypes(), isNarrowFloat))
    return true;
  bool found = false;
  op.getBody()->walk([&](Operation *inner) {
    found |= llvm::any_of(inner->getResultTypes(), isNarrowFloat);
  });
  return found;
}

/// If `op` is a contraction of a narrow and an f32 operand into a narrow
/// accumulator, `out + trunc(wide * ext(narrow))` (autodiff's adjoint of a
/// matmul with f32 results over bf16 operands: the logits'), the index of
/// its f32 input.
std::optional<unsigned> mixedContraction(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() == 0 || op.getBody()->getOperations().size() > 5)
    return std::nullopt;
  Block *body = op.getBody();
  Value out = body->getArgument(2);
  Type narrow = out.getType();
  if (!isNarrowFloat(narrow))
    return std::nullopt;
  auto add = cast<linalg::YieldOp>(body->getTerminator())
                 .getValues()[0]
                 .getDefiningOp<arith::AddFOp>();
  if (!add || (add.getLhs() != out && add.getRhs() != out))
    return std::nullopt;
  auto trunc = (add.getLhs() == out ? add.getRhs() : add.getLhs())
                   .getDefiningOp<arith::TruncFOp>();
  auto mul = trunc ? trunc.getIn().getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return std::nullopt;
  auto strip = [&](Value v) {
    auto ext = v.getDefiningOp<arith::ExtFOp>();
    return ext ? ext.getIn() : v;
  };
  Value lhs = strip(mul.getLhs()), rhs = strip(mul.getRhs());
  for (unsigned wide : {0u, 1u}) {
    Value w = body->getArgument(wide), n = body->getArgument(1 - wide);
    if (w.getType().isF32() && n.getType() == narrow &&
        ((lhs == w && rhs == n) || (lhs == n && rhs == w)))
      return wide;
  }
  return std::nullopt;
}

/// Rounds the f32 operand of a mixed contraction to the narrow type, so it
/// becomes a narrow multiply-accumulate (a bf16 GEMM accumulating in f32),
/// as PyTorch rounds the logits' f32 gradient before its bf16 matmuls.
void narrowMixedContraction(linalg::GenericOp op, unsigned wide) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value out = op.getDpsInits()[0];
  Type narrow = getElementTypeOrSelf(out.getType());
  SmallVector<Value> inputs(op.getDpsInputs());
  inputs[wide] = loom::LinalgBuilder(b, loc).convert(inputs[wide], narrow);
  auto gemm = linalg::GenericOp::create(
      b, loc, out.getType(), inputs, out, op.getIndexingMapsArray(),
      op.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value product = arith::MulFOp::create(nb, nloc, args[0], args[1]);
        linalg::YieldOp::create(
            nb, nloc, ValueRange{arith::AddFOp::create(nb, nloc, args[2],
                                                       product)});
      });
  gemm->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  op->replaceAllUsesWith(gemm);
  op->erase();
}

struct WidenCompute
    : loom::codegen::impl::CodegenWidenComputePassBase<WidenCompute> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, unsigned>> mixed;
    getOperation().walk([&](linalg::GenericOp op) {
      if (op.hasPureTensorSemantics())
        if (std::optional<unsigned> wide = mixedContraction(op))
          mixed.push_back({op, *wide});
    });
    for (auto [op, wide] : mixed)
      narrowMixedContraction(op, wide);

    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp op) {
      if (op.hasPureTensorSemantics() && touchesNarrowFloat(op) &&
          bodyIsRetypable(*op.getBody()) &&
          !(op.getNumReductionLoops() > 0 && loom::codegen::mulAddAlpha(op)))
        generics.push_back(op);
    });
    // A rounded reduction result -> the f32 tensor it was rounded from.
    DenseMap<Value, Value> wideOf;
    for (linalg::GenericOp op : generics)
      widen(op, wideOf);
  }

  void widen(linalg::GenericOp op, DenseMap<Value, Value> &wideOf) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    loom::LinalgBuilder lb(b, loc);
    Type f32 = b.getF32Type();
    Block *body = op.getBody();
    bool reduces = op.getNumReductionLoops() > 0;

    SmallVector<Value> inputs, inits;
    for (Value input : op.getDpsInputs()) {
      auto it = wideOf.find(input);
      inputs.push_back(it == wideOf.end() ? input : it->second);
    }
    // Accumulators widen: narrow inits whose body argument is read.
    SmallVector<bool> widened;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      Value value = init.get();
      bool widen = reduces && isNarrowFloat(value.getType()) &&
                   !op.getMatchingBlockArgument(&init).use_empty();
      widened.push_back(widen);
      inits.push_back(widen ? widenInit(lb, value, wideOf) : value);
    }

    SmallVector<Type> resultTypes;
    for (Value init : inits)
      resultTypes.push_back(init.getType());
    auto wide = linalg::GenericOp::create(
        b, loc, resultTypes, inputs, inits, op.getIndexingMapsArray(),
        op.getIteratorTypesArray());
    SmallVector<Type> argTypes;
    SmallVector<Location> argLocs;
    for (Value operand : llvm::concat<Value>(inputs, inits)) {
      argTypes.push_back(getElementTypeOrSelf(operand.getType()));
      argLocs.push_back(loc);
    }
    wide->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    Block *newBody =
        b.createBlock(&wide.getRegion(), wide.getRegion().end(), argTypes,
                      argLocs);
    b.setInsertionPointToStart(newBody);
    IRMapping map;
    for (auto [oldArg, newArg] :
         llvm::zip(body->getArguments(), newBody->getArguments()))
      map.map(oldArg, isNarrowFloat(newArg.getType())
                          ? Value(arith::ExtFOp::create(b, loc, f32, newArg))
                          : Value(newArg));
    // Narrow values from above (a captured constant) are extended once.
    op.getBody()->walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        if (!map.contains(operand) && isNarrowFloat(operand.getType()) &&
            !op->isAncestor(operand.getParentBlock()->getParentOp()))
          map.map(operand, arith::ExtFOp::create(b, loc, f32, operand));
    });
    for (Operation &inner : body->without_terminator())
      retype(b, inner, map);
    SmallVector<Value> yields;
    for (auto [value, arg] :
         llvm::zip(body->getTerminator()->getOperands(),
                   newBody->getArguments().take_back(inits.size()))) {
      Value mapped = map.lookup(value);
      if (mapped.getType() != arg.getType())
        mapped = cast<FloatType>(mapped.getType()).getWidth() >
                         cast<FloatType>(arg.getType()).getWidth()
                     ? Value(arith::TruncFOp::create(b, loc, arg.getType(),
                                                     mapped))
                     : Value(arith::ExtFOp::create(b, loc, arg.getType(),
                                                   mapped));
      yields.push_back(mapped);
    }
    linalg::YieldOp::create(b, loc, yields);

    b.setInsertionPointAfter(wide);
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      Value replacement = wide->getResult(i);
      if (widened[i]) {
        Value rounded = lb.convert(replacement, getElementTypeOrSelf(result));
        wideOf[rounded] = replacement;
        replacement = rounded;
      }
      result.replaceAllUsesWith(replacement);
    }
    op->erase();
  }

  /// The f32 accumulator for a narrow init: an f32 fill of the same
  /// constant, the f32 tensor a rounded reduction came from, or `init`
  /// extended.
  Value widenInit(loom::LinalgBuilder &lb, Value init,
                  const DenseMap<Value, Value> &wideOf) {
    Type f32 = lb.getBuilder().getF32Type();
    auto shape = cast<RankedTensorType>(init.getType()).getShape();
    if (auto fill = init.getDefiningOp<linalg::FillOp>()) {
      FloatAttr value;
      if (matchPattern(fill.getInputs()[0], m_Constant(&value)))
        return lb.filled(shape, f32, value.getValueAsDouble());
    }
    auto it = wideOf.find(init);
    if (it != wideOf.end())
      return it->second;
    return lb.convert(init, f32);
  }

  /// Clones `op` into the f32 body: narrow float results become f32, the
  /// casts to and from narrow floats fold away.
  void retype(OpBuilder &b, Operation &op, IRMapping &map) {
    Type f32 = b.getF32Type();
    Location loc = op.getLoc();
    auto narrowResult =
        op.getNumResults() == 1 && isNarrowFloat(op.getResult(0).getType());
    if (auto ext = dyn_cast<arith::ExtFOp>(op)) {
      Value in = map.lookup(ext.getIn());
      map.map(ext.getResult(),
              in.getType() == ext.getType()
                  ? in
                  : Value(arith::ExtFOp::create(b, loc, ext.getType(), in)));
      return;
    }
    if (auto trunc = dyn_cast<arith::TruncFOp>(op); trunc && narrowResult) {
      Value in = map.lookup(trunc.getIn());
      map.map(trunc.getResult(),
              in.getType() == f32
                  ? in
                  : Value(arith::TruncFOp::create(b, loc, f32, in)));
      return;
    }
    if (auto constant = dyn_cast<arith::ConstantOp>(op); constant && narrowResult) {
      double value = cast<FloatAttr>(constant.getValue()).getValueAsDouble();
      map.map(constant.getResult(),
              arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value)));
      return;
    }
    Operation *clone = b.clone(op, map);
    for (OpResult result : clone->getResults())
      if (isNarrowFloat(result.getType()))
        result.setType(f32);
  }
};

} // namespace
