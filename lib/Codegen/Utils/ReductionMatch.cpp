//===- ReductionMatch.cpp - reductions to regroup or take over ------------===//

#include "loom/Codegen/Utils/ReductionMatch.h"
#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

Operation *loom::codegen::regroupableCombiner(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumReductionLoops() == 0)
    return nullptr;
  SmallVector<Operation *> combiners;
  Value reduced = matchReduction(op.getRegionOutputArgs(), 0, combiners);
  if (!reduced || combiners.size() != 1 ||
      !isa<arith::AddFOp, arith::MulFOp, arith::MaximumFOp, arith::MinimumFOp,
           arith::MaxNumFOp, arith::MinNumFOp>(combiners[0]) ||
      !arith::getNeutralElement(combiners[0]) ||
      !op.getRegionOutputArgs()[0].hasOneUse())
    return nullptr;
  return combiners[0];
}

linalg::FillOp loom::codegen::fillBefore(Operation *op, Value buffer) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(prev))
      return fill.getOutputs()[0] == buffer ? fill : linalg::FillOp();
    if (!isMemoryEffectFree(prev))
      return {};
  }
  return {};
}
