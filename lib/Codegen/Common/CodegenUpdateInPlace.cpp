//===- UpdateInPlace.cpp - a step's updates into their arguments' buffers -===//
//
// A training step returns every parameter and optimizer state tensor it
// updates: without help the caller holds two copies of all of them (the
// arguments and the results), which at ~1B parameters is most of the step's
// memory. The update of an argument may be written into the argument's own
// buffer once nothing reads the old value any more; this pass finds the
// results for which that holds in the step's final order and records them
// (`train.tied_results`) for the memory timeline, the plan and loomc's entry
// point.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Common/Passes.h"
#include "loom/Dialect/Coll/CollInterfaces.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <map>

namespace loom::codegen {
#define GEN_PASS_DEF_CODEGENUPDATEINPLACEPASS
#include "loom/Codegen/Common/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;
using namespace loom::train;

namespace {

/// Whether `op`'s result is a view of its operand: the same buffer after
/// bufferisation (reshapes, slices, casts).
bool isView(Operation *op) {
  return isa<ViewLikeOpInterface, tensor::ExpandShapeOp,
             tensor::CollapseShapeOp, tensor::ExtractSliceOp, tensor::CastOp>(
      op);
}

/// The last position in `block` at which the buffer of `value` (or of a view
/// of it) is read, other than by `except` reading `value` itself (through a
/// view, `except` could read other indices than it writes): a use's
/// top-level op, or for a collective that reads it, the collective's wait
/// (it reads asynchronously until then); -1 if none. Ops are numbered by
/// `position`.
int64_t lastRead(Value value, Block &block,
                 const DenseMap<Operation *, unsigned> &position,
                 Operation *except) {
  int64_t last = -1;
  SmallVector<Value> work = {value};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (user == except && v == value)
        continue;
      if (isView(user)) {
        llvm::append_range(work, user->getResults());
        continue;
      }
      Operation *top = block.findAncestorOpInBlock(*user);
      if (!top)
        continue;
      last = std::max<int64_t>(last, position.lookup(top));
      if (auto start = dyn_cast<loom::coll::CollectiveOpInterface>(top))
        if (Operation *wait = start.getWait())
          if (Operation *waitTop = block.findAncestorOpInBlock(*wait))
            last = std::max<int64_t>(last, position.lookup(waitTop));
    }
  }
  return last;
}

/// Whether the elementwise op defining `result` may write it into the
/// buffer of `arg`: it reads `arg` (if at all) at the indices it writes, it
/// starts a new buffer (a tensor.empty init, which the memory timeline then
/// counts as written straight into the caller's buffer), and every other
/// read of `arg` comes before it.
bool canTie(OpResult result, BlockArgument arg, Block &block,
            const DenseMap<Operation *, unsigned> &position) {
  auto op = dyn_cast<linalg::LinalgOp>(result.getOwner());
  if (!op || op->getBlock() != &block || result.getType() != arg.getType() ||
      !op.hasPureTensorSemantics() ||
      op.getNumLoops() != op.getNumParallelLoops())
    return false;
  OpOperand *init = op.getDpsInitOperand(result.getResultNumber());
  if (op.payloadUsesValueFromOperand(init) ||
      !init->get().getDefiningOp<tensor::EmptyOp>())
    return false;
  AffineMap written = op.getMatchingIndexingMap(init);
  if (!written.isPermutation())
    return false;
  for (OpOperand &operand : op->getOpOperands())
    if (operand.get() == arg && op.getMatchingIndexingMap(&operand) != written)
      return false;
  return lastRead(arg, block, position, op) < int64_t(position.lookup(op));
}

struct UpdateInPlace
    : loom::codegen::impl::CodegenUpdateInPlacePassBase<UpdateInPlace> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return;
    Block &block = func.front();
    DenseMap<Operation *, unsigned> position;
    for (auto [index, op] : llvm::enumerate(block))
      position[&op] = index;
    std::map<std::pair<StringRef, StringRef>, unsigned> argOf;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto key = getParamOrStateKey(func.getArgAttrDict(i));
          !key.first.empty())
        argOf[key] = i;
    Operation *terminator = block.getTerminator();
    SmallVector<int64_t> tied(func.getNumResults(), -1);
    DenseSet<unsigned> taken;
    unsigned count = 0;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto it = argOf.find(getParamOrStateKey(func.getResultAttrDict(i)));
      auto result = dyn_cast<OpResult>(terminator->getOperand(i));
      if (it == argOf.end() || !result || taken.contains(it->second) ||
          llvm::count(terminator->getOperands(), result) != 1 ||
          !canTie(result, func.getArgument(it->second), block, position))
        continue;
      tied[i] = it->second;
      taken.insert(it->second);
      ++count;
    }
    func->setAttr(loom::train::TrainDialect::kTiedResultsAttrName,
                  DenseI64ArrayAttr::get(&getContext(), tied));
    if (count == 0)
      func->removeAttr(loom::train::TrainDialect::kTiedResultsAttrName);
  }
};

} // namespace
