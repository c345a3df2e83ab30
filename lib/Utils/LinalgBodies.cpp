//===- LinalgBodies.cpp - what a linalg body computes ---------------------===//

#include "loom/Utils/LinalgBodies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

Value loom::getAccumulatedTerm(linalg::GenericOp generic) {
  Block &body = generic.getRegion().front();
  BlockArgument out = body.getArgument(generic.getNumDpsInputs());
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  // Its one use is the add, so the other side cannot read it.
  if (!add || !out.hasOneUse())
    return {};
  if (add.getLhs() == out)
    return add.getRhs();
  if (add.getRhs() == out)
    return add.getLhs();
  return {};
}
