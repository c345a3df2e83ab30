//===- Accumulation.cpp - gradients summed over microbatches
//---------------===//

#include "Accumulation.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include <functional>
#include <set>

using namespace mlir;
using namespace loom;

namespace {

/// If `op` adds two tensors element-wise (what train-autodiff's
/// accumulation builds), its two inputs.
std::optional<std::pair<Value, Value>> getAccumulation(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumDpsInputs() != 2 ||
      generic.getNumDpsInits() != 1 || generic.getNumResults() != 1 ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }) ||
      generic.getNumReductionLoops() != 0)
    return std::nullopt;
  Block &body = generic.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || &body.front() != add.getOperation() ||
      !((add.getLhs() == body.getArgument(0) &&
         add.getRhs() == body.getArgument(1)) ||
        (add.getLhs() == body.getArgument(1) &&
         add.getRhs() == body.getArgument(0))))
    return std::nullopt;
  return std::make_pair(generic.getDpsInputs()[0], generic.getDpsInputs()[1]);
}

int64_t getMicrobatch(Value v) {
  if (Operation *def = v.getDefiningOp())
    if (auto mb = def->getAttrOfType<IntegerAttr>(
            loom::train::TrainDialect::kMicrobatchAttrName))
      return mb.getInt();
  return INT64_MAX;
}

} // namespace

void loom::pp::accumulateInMicrobatchOrder(
    Block &body, const DenseSet<Operation *> &forward) {
  SmallVector<Operation *> roots;
  auto inTree = [](Value v) {
    Operation *def = v.getDefiningOp();
    return def && def->hasOneUse() && getAccumulation(def) &&
           getAccumulation(*def->getUsers().begin());
  };
  for (Operation &op : body) {
    if (!getAccumulation(&op) || forward.contains(&op))
      continue;
    bool inner = op.hasOneUse() && getAccumulation(*op.getUsers().begin());
    if (!inner)
      roots.push_back(&op);
  }
  for (Operation *root : roots) {
    SmallVector<Value> leaves;
    SmallVector<Operation *> tree;
    std::function<void(Operation *)> collect = [&](Operation *op) {
      tree.push_back(op);
      auto [a, b] = *getAccumulation(op);
      for (Value v : {a, b}) {
        if (inTree(v))
          collect(v.getDefiningOp());
        else
          leaves.push_back(v);
      }
    };
    collect(root);
    std::set<int64_t> microbatches;
    for (Value leaf : leaves)
      microbatches.insert(getMicrobatch(leaf));
    if (leaves.size() < 3 || microbatches.size() < 2 ||
        microbatches.count(INT64_MAX))
      continue;
    SmallVector<Value> sorted = leaves;
    llvm::stable_sort(sorted, [](Value a, Value b) {
      return getMicrobatch(a) < getMicrobatch(b);
    });
    auto type = cast<RankedTensorType>(root->getResult(0).getType());
    Type element = type.getElementType();
    Type wide = element.getIntOrFloatBitWidth() < 32
                    ? Float32Type::get(root->getContext())
                    : element;
    OpBuilder b(root);
    Location loc = root->getLoc();
    LinalgBuilder lb(b, loc);
    unsigned rank = type.getRank();
    Value acc = lb.convert(sorted.front(), wide);
    for (Value leaf : ArrayRef(sorted).drop_front()) {
      // acc + widen(leaf), in one pass over the gradient.
      acc =
          lb.generic(lb.empty(type.getShape(), wide), {acc, leaf},
                     {lb.identity(rank), lb.identity(rank), lb.identity(rank)},
                     [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                       Value x = args[1];
                       if (x.getType() != wide)
                         x = arith::ExtFOp::create(b, l, wide, x);
                       return arith::AddFOp::create(b, l, args[0], x);
                     });
      if (auto mb = leaf.getDefiningOp()
                        ? leaf.getDefiningOp()->getAttr(
                              loom::train::TrainDialect::kMicrobatchAttrName)
                        : Attribute())
        acc.getDefiningOp()->setAttr(
            loom::train::TrainDialect::kMicrobatchAttrName, mb);
    }
    acc = lb.convert(acc, element);
    root->getResult(0).replaceAllUsesWith(acc);
    for (Operation *op : tree)
      op->dropAllUses();
    for (Operation *op : tree)
      op->erase();
  }
}
