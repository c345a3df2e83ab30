//===- ReadValues.cpp - what an op reads from its block -------------------===//

#include "loom/Utils/ReadValues.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

SmallVector<Value> loom::getReadValues(Operation *op) {
  SmallVector<Value> values(op->getOperands());
  if (op->getNumRegions()) {
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op->getRegions(), captured);
    values.append(captured.begin(), captured.end());
  }
  return values;
}
