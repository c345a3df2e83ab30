//===- TrainOptimizer.cpp - append the optimizer update to a step ---------===//

#include "loom/Autodiff/Passes.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace loom::autodiff {
#define GEN_PASS_DEF_TRAINOPTIMIZERPASS
#include "loom/Autodiff/Passes.h.inc"
} // namespace loom::autodiff

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

/// Tags the op defining `value` as part of the update (see TrainDialect).
Value markUpdate(Value value) {
  value.getDefiningOp()->setAttr(TrainDialect::kUpdateAttrName,
                                 UnitAttr::get(value.getContext()));
  return value;
}

/// Converts a scalar float to `type` (no-op when it already is).
Value castTo(OpBuilder &b, Location loc, Value value, Type type) {
  unsigned from = value.getType().getIntOrFloatBitWidth();
  unsigned to = type.getIntOrFloatBitWidth();
  if (value.getType() == type)
    return value;
  if (from < to)
    return arith::ExtFOp::create(b, loc, type, value);
  return arith::TruncFOp::create(b, loc, type, value);
}

struct OptimizerConfig {
  bool adamw;
  double lr, beta1, beta2, eps, weightDecay;
  bool lrInput;
};

/// One parameter of the step: its argument, name and gradient result.
struct ParamSlot {
  BlockArgument param;
  StringAttr name;
  unsigned gradResult;
};

class StepRewriter {
public:
  StepRewriter(func::FuncOp func, const OptimizerConfig &config)
      : func(func), config(config) {}

  LogicalResult run();

private:
  BlockArgument addState(Type type, const Twine &name);
  Value elementwise(RankedTensorType type, ValueRange inputs,
                    unsigned numScalars, LinalgBuilder::BodyFn body);

  func::FuncOp func;
  const OptimizerConfig &config;
  /// Where the next state argument goes: after the parameters and the state
  /// added so far, so the step takes (params, state, inputs).
  unsigned nextStateIndex = 0;
  SmallVector<Value> newStates;
  SmallVector<StringAttr> newStateNames;
};

BlockArgument StepRewriter::addState(Type type, const Twine &name) {
  MLIRContext *ctx = func.getContext();
  NamedAttribute tag(StringAttr::get(ctx, TrainDialect::kStateAttrName),
                     StringAttr::get(ctx, name));
  unsigned index = nextStateIndex++;
  (void)func.insertArgument(index, type, DictionaryAttr::get(ctx, tag),
                            func.getLoc());
  return func.getArgument(index);
}

/// An elementwise generic over `type`: tensor inputs first, then
/// `numScalars` 0-d tensors broadcast to every element.
Value StepRewriter::elementwise(RankedTensorType type, ValueRange inputs,
                                unsigned numScalars,
                                LinalgBuilder::BodyFn body) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  OpBuilder builder(ret);
  LinalgBuilder lb(builder, ret.getLoc());
  unsigned rank = type.getRank();
  SmallVector<AffineMap> maps(inputs.size() - numScalars, lb.identity(rank));
  maps.append(numScalars, lb.map(rank, {}));
  maps.push_back(lb.identity(rank));
  return markUpdate(lb.generic(lb.empty(type.getShape(), type.getElementType()),
                               inputs, maps, body));
}

LogicalResult StepRewriter::run() {
  Block &block = func.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  MLIRContext *ctx = func.getContext();

  SmallVector<ParamSlot> slots;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto name =
        func.getResultAttrOfType<StringAttr>(i, TrainDialect::kGradAttrName);
    if (!name)
      continue;
    for (BlockArgument arg : func.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), TrainDialect::kParamAttrName) ==
          name)
        slots.push_back({arg, name, i});
  }
  if (slots.empty())
    return func.emitOpError("has a loss but no gradients; run "
                            "train-autodiff before train-optimizer");
  for (BlockArgument arg : func.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), TrainDialect::kStateAttrName))
      return func.emitOpError("already has optimizer state (argument #")
             << arg.getArgNumber()
             << "); train-optimizer runs once, on train-autodiff's output";
  for (ParamSlot &slot : slots)
    nextStateIndex = std::max(nextStateIndex, slot.param.getArgNumber() + 1);

  OpBuilder builder(ret);
  Location loc = ret.getLoc();
  LinalgBuilder lb(builder, loc);
  Type f32 = builder.getF32Type();

  // With lr-input, the learning rate is a 0-d tensor argument, the last
  // input, broadcast into each update as one more scalar operand.
  SmallVector<Value> lrOperand;
  if (config.lrInput) {
    NamedAttribute tag(StringAttr::get(ctx, TrainDialect::kInputAttrName),
                       StringAttr::get(ctx, "lr"));
    unsigned index = func.getNumArguments();
    (void)func.insertArgument(index, RankedTensorType::get({}, f32),
                              DictionaryAttr::get(ctx, tag), loc);
    lrOperand.push_back(func.getArgument(index));
  }

  // AdamW's step counter and bias corrections, as 0-d f32 tensors.
  Value correction1, correction2;
  if (config.adamw) {
    auto scalarType = RankedTensorType::get({}, f32);
    BlockArgument step = addState(scalarType, "step");
    Value one = lb.floatConstant(f32, 1.0);
    Value next = markUpdate(
        lb.generic(lb.empty({}, f32), step, {lb.map(0, {}), lb.map(0, {})},
                   [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                     return arith::AddFOp::create(b, l, args[0], one);
                   }));
    newStates.push_back(next);
    newStateNames.push_back(StringAttr::get(ctx, "step"));
    // 1 - beta^t in f64 (beta exactly as given, not rounded to f32 first),
    // rounded once to f32, as torch.optim.AdamW's Python-float corrections.
    auto correction = [&](double beta) {
      Type f64 = builder.getF64Type();
      Value betaValue = lb.floatConstant(f64, beta);
      Value oneF64 = lb.floatConstant(f64, 1.0);
      return markUpdate(
          lb.generic(lb.empty({}, f32), next, {lb.map(0, {}), lb.map(0, {})},
                     [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                       Value t = arith::ExtFOp::create(b, l, f64, args[0]);
                       Value power = math::PowFOp::create(b, l, betaValue, t);
                       Value kept = arith::SubFOp::create(b, l, oneF64, power);
                       return arith::TruncFOp::create(b, l, f32, kept);
                     }));
    };
    correction1 = correction(config.beta1);
    correction2 = correction(config.beta2);
  }

  SmallVector<Value> newParams;
  for (ParamSlot &slot : slots) {
    auto type = cast<RankedTensorType>(slot.param.getType());
    Type elem = type.getElementType();
    Value grad = ret.getOperand(slot.gradResult);
    auto constant = [&](OpBuilder &b, Location l, double v) -> Value {
      return arith::ConstantOp::create(b, l, b.getFloatAttr(elem, v));
    };
    // The learning rate inside an update body whose scalar operands end at
    // `lrArg` (used only with lr-input).
    auto learningRate = [&](OpBuilder &b, Location l, ValueRange args,
                            unsigned lrArg) -> Value {
      return config.lrInput ? castTo(b, l, args[lrArg], elem)
                            : constant(b, l, config.lr);
    };
    if (!config.adamw) {
      SmallVector<Value> inputs = {slot.param, grad};
      inputs.append(lrOperand);
      newParams.push_back(elementwise(
          type, inputs, lrOperand.size(),
          [&](OpBuilder &b, Location l, ValueRange args) -> Value {
            Value decay = arith::MulFOp::create(
                b, l, constant(b, l, config.weightDecay), args[0]);
            Value direction = arith::AddFOp::create(b, l, args[1], decay);
            Value stepValue = arith::MulFOp::create(
                b, l, learningRate(b, l, args, 2), direction);
            return arith::SubFOp::create(b, l, args[0], stepValue);
          }));
      continue;
    }
    BlockArgument m = addState(type, slot.name.getValue() + ".m");
    BlockArgument v = addState(type, slot.name.getValue() + ".v");
    Value newM =
        elementwise(type, {m, grad}, 0,
                    [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                      Value kept = arith::MulFOp::create(
                          b, l, constant(b, l, config.beta1), args[0]);
                      Value fresh = arith::MulFOp::create(
                          b, l, constant(b, l, 1.0 - config.beta1), args[1]);
                      return arith::AddFOp::create(b, l, kept, fresh);
                    });
    Value newV = elementwise(
        type, {v, grad}, 0,
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value kept = arith::MulFOp::create(b, l, constant(b, l, config.beta2),
                                             args[0]);
          Value square = arith::MulFOp::create(b, l, args[1], args[1]);
          Value fresh = arith::MulFOp::create(
              b, l, constant(b, l, 1.0 - config.beta2), square);
          return arith::AddFOp::create(b, l, kept, fresh);
        });
    SmallVector<Value> inputs = {slot.param, newM, newV, correction1,
                                 correction2};
    inputs.append(lrOperand);
    newParams.push_back(elementwise(
        type, inputs, 2 + lrOperand.size(),
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value c1 = castTo(b, l, args[3], elem);
          Value c2 = castTo(b, l, args[4], elem);
          Value mHat = arith::DivFOp::create(b, l, args[1], c1);
          Value vHat = arith::DivFOp::create(b, l, args[2], c2);
          Value root = math::SqrtOp::create(b, l, vHat);
          Value denominator =
              arith::AddFOp::create(b, l, root, constant(b, l, config.eps));
          Value update = arith::DivFOp::create(b, l, mHat, denominator);
          Value decay = arith::MulFOp::create(
              b, l, constant(b, l, config.weightDecay), args[0]);
          Value direction = arith::AddFOp::create(b, l, update, decay);
          Value stepValue = arith::MulFOp::create(
              b, l, learningRate(b, l, args, 5), direction);
          return arith::SubFOp::create(b, l, args[0], stepValue);
        }));
    newStates.push_back(newM);
    newStates.push_back(newV);
    newStateNames.push_back(StringAttr::get(ctx, slot.name.getValue() + ".m"));
    newStateNames.push_back(StringAttr::get(ctx, slot.name.getValue() + ".v"));
  }

  // Results: drop the gradients, append new parameters then new state.
  llvm::BitVector gradResults(func.getNumResults());
  for (ParamSlot &slot : slots)
    gradResults.set(slot.gradResult);
  SmallVector<Value> operands;
  for (unsigned i = 0, e = ret.getNumOperands(); i < e; ++i)
    if (!gradResults.test(i))
      operands.push_back(ret.getOperand(i));
  if (failed(func.eraseResults(gradResults)))
    return failure();
  auto append = [&](Value value, StringRef attr, StringAttr name) {
    NamedAttribute tag(StringAttr::get(ctx, attr), name);
    (void)func.insertResult(func.getNumResults(), value.getType(),
                            DictionaryAttr::get(ctx, tag));
    operands.push_back(value);
  };
  for (auto [slot, value] : llvm::zip(slots, newParams))
    append(value, TrainDialect::kParamAttrName, slot.name);
  for (auto [name, value] : llvm::zip(newStateNames, newStates))
    append(value, TrainDialect::kStateAttrName, name);
  ret->setOperands(operands);
  return success();
}

struct TrainOptimizerPass
    : public loom::autodiff::impl::TrainOptimizerPassBase<TrainOptimizerPass> {
  using TrainOptimizerPassBase::TrainOptimizerPassBase;

  void runOnOperation() override {
    if (kind != "adamw" && kind != "sgd") {
      getOperation().emitError() << "train-optimizer: expected kind adamw or "
                                    "sgd, got '"
                                 << kind << "'";
      return signalPassFailure();
    }
    if (!(lr > 0.0) || beta1 < 0.0 || beta1 >= 1.0 || beta2 < 0.0 ||
        beta2 >= 1.0 || !(eps > 0.0) || weightDecay < 0.0) {
      getOperation().emitError()
          << "train-optimizer: expected lr > 0, beta1 and beta2 in [0, 1), "
             "eps > 0 and weight-decay >= 0, got lr="
          << lr << " beta1=" << beta1 << " beta2=" << beta2 << " eps=" << eps
          << " weight-decay=" << weightDecay;
      return signalPassFailure();
    }
    OptimizerConfig config{kind == "adamw", lr,     beta1, beta2, eps,
                           weightDecay,     lrInput};
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!getLossResultIndex(func))
        continue;
      // New arguments and results would invalidate the in-place table.
      if (func->hasAttr(loom::train::TrainDialect::kTiedResultsAttrName)) {
        func.emitOpError("is a planned step (")
            << loom::train::TrainDialect::kTiedResultsAttrName
            << ", from codegen-update-in-place); train-optimizer runs on "
               "the differentiated forward";
        return signalPassFailure();
      }
      if (failed(StepRewriter(func, config).run()))
        return signalPassFailure();
      // What the trainer's manifest reports, and its default rate.
      Builder builder(func.getContext());
      func->setAttr(loom::train::TrainDialect::kOptimizerAttrName,
                    builder.getStringAttr(kind));
      func->setAttr(loom::train::TrainDialect::kLearningRateAttrName,
                    builder.getF64FloatAttr(lr));
    }
  }
};

} // namespace
