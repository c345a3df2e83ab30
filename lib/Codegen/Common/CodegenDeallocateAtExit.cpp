//===- CodegenDeallocateAtExit.cpp - a planned step's buffers freed at exit -===//
//
// A bufferised step whose buffers the memory plan placed allocates its arena
// and its sends' empty buffers at the top of the function, none leaving it:
// each is freed where the function returns, as upstream's ownership-based
// deallocation would, without its pipeline's analyses. Any other module gets
// upstream's pipeline.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Common/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"

namespace loom::codegen {
#define GEN_PASS_DEF_CODEGENDEALLOCATEATEXITPASS
#include "loom/Codegen/Common/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

/// Whether a buffer derived from `root` may outlive its function or be
/// reached where this pass does not look: returned, passed to a call or to
/// a region op other than a linalg op (whose regions see elements) or an
/// scf.for (whose iteration arguments and results are followed), stored,
/// turned into a tensor, or already freed.
bool escapes(Value root) {
  SmallVector<Value> work = {root};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (isa<func::ReturnOp, CallOpInterface, memref::DeallocOp,
              bufferization::DeallocOp, bufferization::ToTensorOp>(user))
        return true;
      if (auto store = dyn_cast<memref::StoreOp>(user);
          store && store.getValueToStore() == value)
        return true;
      if (auto loop = dyn_cast<scf::ForOp>(user)) {
        if (OpResult result = loop.getTiedLoopResult(&use)) {
          work.push_back(result);
          work.push_back(loop.getTiedLoopRegionIterArg(&use));
          continue;
        }
        return true;
      }
      if (user->getNumRegions() > 0 && !isa<linalg::LinalgOp>(user))
        return true;
      for (Value result : user->getResults()) {
        if (isa<BaseMemRefType>(result.getType()))
          work.push_back(result);
        else if (isa<TensorType>(result.getType()))
          return true;
      }
    }
  }
  return false;
}

/// The allocations of `func` to free before its return, or nothing if it
/// does not qualify.
std::optional<SmallVector<memref::AllocOp>> allocationsToFree(func::FuncOp func) {
  if (!func.getBody().hasOneBlock() ||
      !isa<func::ReturnOp>(func.getBody().front().getTerminator()))
    return std::nullopt;
  Block &body = func.getBody().front();
  SmallVector<memref::AllocOp> allocations;
  WalkResult walk = func.walk([&](Operation *op) {
    if (isa<memref::DeallocOp, bufferization::DeallocOp, memref::ReallocOp>(op))
      return WalkResult::interrupt();
    auto alloc = dyn_cast<memref::AllocOp>(op);
    if (!alloc)
      return WalkResult::advance();
    if (alloc->getBlock() != &body || escapes(alloc.getResult()))
      return WalkResult::interrupt();
    allocations.push_back(alloc);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return std::nullopt;
  return allocations;
}

struct CodegenDeallocateAtExitPass
    : public loom::codegen::impl::CodegenDeallocateAtExitPassBase<
          CodegenDeallocateAtExitPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::FuncOp, SmallVector<memref::AllocOp>>> plans;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      std::optional<SmallVector<memref::AllocOp>> allocations =
          allocationsToFree(func);
      if (!allocations) {
        OpPassManager upstream(ModuleOp::getOperationName());
        bufferization::buildBufferDeallocationPipeline(upstream);
        if (failed(runPipeline(upstream, module)))
          signalPassFailure();
        return;
      }
      plans.push_back({func, std::move(*allocations)});
    }
    for (auto &[func, allocations] : plans) {
      Operation *exit = func.getBody().front().getTerminator();
      OpBuilder builder(exit);
      for (memref::AllocOp alloc : allocations)
        memref::DeallocOp::create(builder, alloc.getLoc(), alloc.getResult());
    }
  }
};

} // namespace
