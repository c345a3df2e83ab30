//===- CollLowering.cpp - shared parts of lowering coll to calls ----------===//

#include "loom/Conversion/CollToLoomrt.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace loom::coll;

CollOpsToLower loom::coll::collectCollOps(ModuleOp module) {
  CollOpsToLower ops;
  module.walk([&](Operation *op) {
    if (isa<CollectiveOpInterface>(op))
      ops.starts.push_back(op);
    else if (isa<CommRankOp>(op))
      ops.ranks.push_back(op);
    else if (isa<ReleaseOp>(op))
      ops.releases.push_back(op);
    else if (isa<CommWorldOp>(op))
      ops.worlds.push_back(op);
    else if (isa<CommGroupOp>(op))
      ops.groups.push_back(op);
  });
  return ops;
}

func::FuncOp loom::coll::declarePrivateFunction(ModuleOp module, StringRef name,
                                                FunctionType type) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder builder(module.getBodyRegion());
  auto func = func::FuncOp::create(builder, module.getLoc(), name, type);
  func.setPrivate();
  return func;
}

Value loom::coll::getGroupRank(OpBuilder &builder, Location loc, Value rank,
                               Value comm) {
  Type i64 = builder.getI64Type();
  // A group's rank from its parent's: floor(r / stride) mod size.
  for (GroupStep step : getGroupSteps(comm)) {
    auto constant = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(builder, loc, i64, v);
    };
    rank = arith::DivUIOp::create(builder, loc, rank, constant(step.stride));
    rank = arith::RemUIOp::create(builder, loc, rank, constant(step.size));
  }
  return rank;
}

LogicalResult loom::coll::lowerRanksAndWorlds(ModuleOp module,
                                              const CollOpsToLower &ops,
                                              StringRef rankFunction) {
  OpBuilder builder(module.getContext());
  Type i64 = builder.getI64Type();
  for (Operation *op : ops.ranks) {
    func::FuncOp callee = declarePrivateFunction(
        module, rankFunction, builder.getFunctionType({}, {i64}));
    builder.setInsertionPoint(op);
    Location loc = op->getLoc();
    Value rank =
        func::CallOp::create(builder, loc, callee, ValueRange{}).getResult(0);
    rank = getGroupRank(builder, loc, rank, cast<CommRankOp>(op).getComm());
    op->getResult(0).replaceAllUsesWith(
        arith::IndexCastOp::create(builder, loc, builder.getIndexType(), rank));
    op->erase();
  }
  // Groups of groups go before the groups they split.
  for (Operation *op : llvm::reverse(ops.groups)) {
    if (!op->use_empty())
      return op->emitOpError("is still used after lowering the collectives");
    op->erase();
  }
  for (Operation *op : ops.worlds) {
    if (!op->use_empty())
      return op->emitOpError("is still used after lowering the collectives");
    op->erase();
  }
  return success();
}
