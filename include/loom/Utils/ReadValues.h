//===- ReadValues.h - what an op reads from its block -----------*- C++ -*-===//

#ifndef LOOM_UTILS_READVALUES_H
#define LOOM_UTILS_READVALUES_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

namespace loom {

/// The values `op` reads: its operands, then the values its regions use
/// from above (a linalg body's captured constants).
llvm::SmallVector<mlir::Value> getReadValues(mlir::Operation *op);

} // namespace loom

#endif // LOOM_UTILS_READVALUES_H
