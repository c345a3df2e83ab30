//===- ScalarAdjoints.cpp - derivatives of scalar arith/math code ---------===//
//
// Reverse mode over the scalar code of a linalg body. The body's ops are
// already cloned into the adjoint body; this walks them backwards from the
// yielded value and emits, next to them, the derivative with respect to one
// block argument. Each rule reuses the forward result where the derivative
// is a function of it (exp, tanh, sqrt, rsqrt).
//
//===----------------------------------------------------------------------===//

#include "ReverseMode.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;
using namespace loom::autodiff;

namespace {

/// Emits scalar float arithmetic at one location.
struct ScalarBuilder {
  OpBuilder &b;
  Location loc;

  Value constant(Type type, double value) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value neg(Value x) { return arith::NegFOp::create(b, loc, x); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value zeroLike(Value x) { return constant(x.getType(), 0.0); }
  Value cmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
};

/// Calls `add(operand, contribution)` for each operand's partial derivative
/// of `op` given the result's adjoint `g`. Returns false if `op` has no rule.
bool applyRule(ScalarBuilder &s, Operation *op, Value g,
               function_ref<void(Value, Value)> add) {
  Value y = op->getNumResults() == 1 ? op->getResult(0) : Value();
  return TypeSwitch<Operation *, bool>(op)
      .Case([&](arith::AddFOp o) {
        add(o.getLhs(), g);
        add(o.getRhs(), g);
        return true;
      })
      .Case([&](arith::SubFOp o) {
        add(o.getLhs(), g);
        add(o.getRhs(), s.neg(g));
        return true;
      })
      .Case([&](arith::MulFOp o) {
        add(o.getLhs(), s.mul(g, o.getRhs()));
        add(o.getRhs(), s.mul(g, o.getLhs()));
        return true;
      })
      .Case([&](arith::DivFOp o) {
        // d(a/b) = da / b - db * (a/b) / b
        add(o.getLhs(), s.div(g, o.getRhs()));
        add(o.getRhs(), s.neg(s.div(s.mul(g, y), o.getRhs())));
        return true;
      })
      .Case([&](arith::NegFOp o) {
        add(o.getOperand(), s.neg(g));
        return true;
      })
      .Case<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
            arith::MinNumFOp>([&](Operation *o) {
        // The gradient goes to the operand that was chosen; on a tie, to the
        // first (as PyTorch's max does for one winner).
        bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(o);
        Value a = o->getOperand(0), b = o->getOperand(1);
        Value firstWins =
            s.cmp(isMax ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OLE,
                  a, b);
        Value zero = s.zeroLike(g);
        add(a, s.select(firstWins, g, zero));
        add(b, s.select(firstWins, zero, g));
        return true;
      })
      .Case([&](arith::SelectOp o) {
        Value zero = s.zeroLike(g);
        add(o.getTrueValue(), s.select(o.getCondition(), g, zero));
        add(o.getFalseValue(), s.select(o.getCondition(), zero, g));
        return true;
      })
      .Case([&](arith::ExtFOp o) {
        add(o.getIn(),
            arith::TruncFOp::create(s.b, s.loc, o.getIn().getType(), g));
        return true;
      })
      .Case([&](arith::TruncFOp o) {
        add(o.getIn(),
            arith::ExtFOp::create(s.b, s.loc, o.getIn().getType(), g));
        return true;
      })
      .Case([&](math::ExpOp o) {
        add(o.getOperand(), s.mul(g, y));
        return true;
      })
      .Case([&](math::LogOp o) {
        add(o.getOperand(), s.div(g, o.getOperand()));
        return true;
      })
      .Case([&](math::SqrtOp o) {
        // d sqrt(x) = 0.5 / sqrt(x)
        add(o.getOperand(), s.div(s.mul(g, s.constant(g.getType(), 0.5)), y));
        return true;
      })
      .Case([&](math::RsqrtOp o) {
        // d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
        Value cube = s.mul(s.mul(y, y), y);
        add(o.getOperand(),
            s.mul(g, s.mul(s.constant(g.getType(), -0.5), cube)));
        return true;
      })
      .Case([&](math::TanhOp o) {
        Value one = s.constant(g.getType(), 1.0);
        add(o.getOperand(), s.mul(g, s.sub(one, s.mul(y, y))));
        return true;
      })
      .Case([&](math::SinOp o) {
        add(o.getOperand(),
            s.mul(g, math::CosOp::create(s.b, s.loc, o.getOperand())));
        return true;
      })
      .Case([&](math::CosOp o) {
        Value sin = math::SinOp::create(s.b, s.loc, o.getOperand());
        add(o.getOperand(), s.neg(s.mul(g, sin)));
        return true;
      })
      .Case([&](math::AbsFOp o) {
        Value nonNegative =
            s.cmp(arith::CmpFPredicate::OGE, o.getOperand(), s.zeroLike(g));
        add(o.getOperand(), s.select(nonNegative, g, s.neg(g)));
        return true;
      })
      .Case([&](math::PowFOp o) {
        // d a^b = b a^(b-1) da + a^b log(a) db
        Value one = s.constant(g.getType(), 1.0);
        Value lower = math::PowFOp::create(s.b, s.loc, o.getLhs(),
                                           s.sub(o.getRhs(), one));
        add(o.getLhs(), s.mul(g, s.mul(o.getRhs(), lower)));
        Value log = math::LogOp::create(s.b, s.loc, o.getLhs());
        add(o.getRhs(), s.mul(g, s.mul(y, log)));
        return true;
      })
      .Case([&](math::ErfOp o) {
        // d erf(x) = 2 / sqrt(pi) exp(-x^2)
        Value x = o.getOperand();
        Value e = math::ExpOp::create(s.b, s.loc, s.neg(s.mul(x, x)));
        add(x, s.mul(g, s.mul(s.constant(g.getType(), 1.1283791670955126), e)));
        return true;
      })
      .Case([&](math::FmaOp o) {
        add(o.getA(), s.mul(g, o.getB()));
        add(o.getB(), s.mul(g, o.getA()));
        add(o.getC(), g);
        return true;
      })
      .Default([](Operation *) { return false; });
}

} // namespace

Value loom::autodiff::differentiateScalar(OpBuilder &builder, Location loc,
                                          Value result, Value seed, Value wrt) {
  // The ops between `wrt` and `result`: those `result` depends on, in order,
  // that themselves depend on `wrt`.
  llvm::SetVector<Operation *> onPath;
  llvm::DenseSet<Value> dependsOnWrt = {wrt};
  SmallVector<Operation *> worklist;
  llvm::SetVector<Operation *> backwardSlice;
  if (Operation *def = result.getDefiningOp())
    worklist.push_back(def);
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!backwardSlice.insert(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (def->getBlock() == op->getBlock())
          worklist.push_back(def);
  }
  SmallVector<Operation *> ordered(backwardSlice.begin(), backwardSlice.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *op : ordered)
    if (llvm::any_of(op->getOperands(),
                     [&](Value v) { return dependsOnWrt.contains(v); })) {
      onPath.insert(op);
      for (Value r : op->getResults())
        dependsOnWrt.insert(r);
    }
  if (!dependsOnWrt.contains(result))
    return arith::ConstantOp::create(builder, loc,
                                     builder.getFloatAttr(wrt.getType(), 0.0));

  ScalarBuilder s{builder, loc};
  llvm::DenseMap<Value, Value> adjoint;
  adjoint[result] = seed;
  for (Operation *op : llvm::reverse(onPath.getArrayRef())) {
    Value g =
        op->getNumResults() == 1 ? adjoint.lookup(op->getResult(0)) : Value();
    if (!g)
      continue;
    auto add = [&](Value operand, Value contribution) {
      if (!dependsOnWrt.contains(operand))
        return;
      Value &slot = adjoint[operand];
      slot = slot ? s.add(slot, contribution) : contribution;
    };
    if (!applyRule(s, op, g, add)) {
      op->emitOpError("has no derivative rule in train-autodiff (inside a "
                      "linalg body)");
      return {};
    }
  }
  Value g = adjoint.lookup(wrt);
  return g ? g : s.zeroLike(seed);
}
