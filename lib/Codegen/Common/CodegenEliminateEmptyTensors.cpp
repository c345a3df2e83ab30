//===- CodegenEliminateEmptyTensors.cpp - upstream's, where it can act ----===//
//
// Upstream's eliminate-empty-tensors analyses the whole module (One-Shot
// Bufferize's analysis) before it looks for a tensor.empty to replace. A
// syntactic check first finds whether any subset insertion's source can
// start at one; only then does the analysis run.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Common/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Transforms.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SubsetOpInterface.h"

namespace loom::codegen {
#define GEN_PASS_DEF_CODEGENELIMINATEEMPTYTENSORSPASS
#include "loom/Codegen/Common/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

/// Whether upstream's search from `value` (up the chain of tensors it
/// shares a buffer with, same type or casts) may reach a `tensor.empty`.
/// Follows a destination-passing op's result to its init and a cast to its
/// source, as upstream does; stops at any other op (an extract_slice, a
/// reshape: not followed upstream either). What it does not follow but
/// upstream might (a region op's result, a block argument of a region)
/// counts as a maybe.
bool mayStartAtEmpty(Value value) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      Operation *parent = arg.getOwner()->getParentOp();
      return !isa_and_nonnull<func::FuncOp>(parent) ||
             !arg.getOwner()->isEntryBlock();
    }
    Operation *def = value.getDefiningOp();
    if (isa<tensor::EmptyOp>(def))
      return true;
    if (auto cast = dyn_cast<tensor::CastOp>(def)) {
      value = cast.getSource();
      continue;
    }
    if (auto dps = dyn_cast<DestinationStyleOpInterface>(def)) {
      if (!dps.hasPureTensorSemantics())
        return true;
      value = dps.getTiedOpOperand(cast<OpResult>(value))->get();
      continue;
    }
    return def->getNumRegions() > 0;
  }
}

struct CodegenEliminateEmptyTensorsPass
    : public loom::codegen::impl::CodegenEliminateEmptyTensorsPassBase<
          CodegenEliminateEmptyTensorsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool found = module
                     .walk([](SubsetInsertionOpInterface op) {
                       return mayStartAtEmpty(op.getSourceOperand().get())
                                  ? WalkResult::interrupt()
                                  : WalkResult::advance();
                     })
                     .wasInterrupted();
    if (!found) {
      ++numSkipped;
      markAllAnalysesPreserved();
      return;
    }
    ++numRuns;
    // Upstream's pass, as it runs.
    bufferization::OneShotBufferizationOptions options;
    options.allowReturnAllocsFromLoops = true;
    bufferization::OneShotAnalysisState state(module, options);
    if (failed(bufferization::analyzeOp(module, state)))
      return signalPassFailure();
    IRRewriter rewriter(module.getContext());
    if (failed(bufferization::eliminateEmptyTensors(rewriter, module, state)))
      signalPassFailure();
  }
};

} // namespace
