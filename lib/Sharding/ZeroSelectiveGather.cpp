//===- ZeroSelectiveGather.cpp - keep chosen parameters gathered ----------===//

#include "loom/Analysis/CostModel.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Sharding/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace loom::sharding {
#define GEN_PASS_DEF_ZEROSELECTIVEGATHERPASS
#include "loom/Sharding/Passes.h.inc"
} // namespace loom::sharding

using namespace mlir;
using namespace loom;
using namespace loom::coll;

namespace {

/// One gather of a parameter: the start, its wait, the view the region
/// uses (the wait's result after slicing off padding and reshaping) and the
/// release that ends it.
struct Gather {
  AllGatherStartOp start;
  WaitOp wait;
  Value view;
  SmallVector<Operation *> viewOps;
  ReleaseOp release;
};

/// Follows the wait's result through the slice/reshape zero-partition emits:
/// each view is the only user of the previous value besides its release.
std::optional<Gather> describeGather(AllGatherStartOp start) {
  Gather gather;
  gather.start = start;
  gather.wait = dyn_cast_or_null<WaitOp>(
      cast<CollectiveOpInterface>(start.getOperation()).getWait());
  if (!gather.wait)
    return std::nullopt;
  for (Operation *user : gather.wait->getUsers())
    if (auto release = dyn_cast<ReleaseOp>(user))
      gather.release = release;
  if (!gather.release)
    return std::nullopt;
  gather.view = gather.wait.getResult();
  while (true) {
    SmallVector<Operation *> users;
    for (Operation *user : gather.view.getUsers())
      if (!isa<ReleaseOp>(user))
        users.push_back(user);
    if (users.size() != 1 || !isa<tensor::ExtractSliceOp, tensor::ExpandShapeOp,
                                  tensor::CollapseShapeOp>(users[0]))
      break;
    gather.viewOps.push_back(users[0]);
    gather.view = users[0]->getResult(0);
  }
  return gather;
}

struct ZeroSelectiveGatherPass
    : public loom::sharding::impl::ZeroSelectiveGatherPassBase<
          ZeroSelectiveGatherPass> {
  using ZeroSelectiveGatherPassBase::ZeroSelectiveGatherPassBase;

  void runOnOperation() override {
    if (budgetMb < 0) {
      getOperation().emitError()
          << "zero-selective-gather: expected budget-mb >= 0, got "
          << static_cast<double>(budgetMb);
      return signalPassFailure();
    }
    std::optional<CostModel> loaded =
        getCostModel(getOperation(), "zero-selective-gather");
    if (!loaded)
      return signalPassFailure();
    CostModel &model = *loaded;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        runOnFunction(func, model);
  }

  void runOnFunction(func::FuncOp func, const CostModel &model) {
    // Parameters gathered exactly twice, forward then backward.
    struct Candidate {
      unsigned argNumber;
      Gather forward, backward;
      double bytes, secondsPerByte;
    };
    SmallVector<Candidate> candidates;
    for (BlockArgument arg : func.getArguments()) {
      if (!func.getArgAttr(arg.getArgNumber(),
                           train::TrainDialect::kParamAttrName))
        continue;
      SmallVector<AllGatherStartOp> starts;
      for (Operation *user : arg.getUsers())
        if (auto start = dyn_cast<AllGatherStartOp>(user))
          starts.push_back(start);
      if (starts.size() != 2)
        continue;
      if (starts[1]->isBeforeInBlock(starts[0]))
        std::swap(starts[0], starts[1]);
      std::optional<Gather> forward = describeGather(starts[0]);
      std::optional<Gather> backward = describeGather(starts[1]);
      if (!forward || !backward ||
          forward->view.getType() != backward->view.getType())
        continue;
      auto collective = cast<CollectiveOpInterface>(starts[1].getOperation());
      std::optional<int64_t> bytes = collective.getResultBytes();
      if (!bytes || *bytes == 0)
        continue;
      double time = model.getCollectiveTime(starts[1]);
      candidates.push_back({arg.getArgNumber(), *forward, *backward,
                            double(*bytes), time / double(*bytes)});
    }
    // Most time saved per byte kept first; argument order breaks ties.
    llvm::stable_sort(candidates, [](const Candidate &a, const Candidate &b) {
      return a.secondsPerByte > b.secondsPerByte;
    });
    double budget = budgetMb * 1024.0 * 1024.0, used = 0;
    for (Candidate &c : candidates) {
      if (used + c.bytes > budget)
        continue;
      used += c.bytes;
      keepGathered(c.forward, c.backward);
    }
  }

  /// Serves the backward from the forward's gathered copy.
  static void keepGathered(Gather &forward, Gather &backward) {
    backward.view.replaceAllUsesWith(forward.view);
    backward.release.setOperand(forward.wait.getResult());
    forward.release.erase();
    for (Operation *op : llvm::reverse(backward.viewOps))
      op->erase();
    backward.wait.erase();
    backward.start.erase();
  }
};

} // namespace
