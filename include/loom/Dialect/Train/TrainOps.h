//===- TrainOps.h - train operations ----------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_TRAIN_TRAINOPS_H
#define LOOM_DIALECT_TRAIN_TRAINOPS_H

#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

#include "loom/Dialect/Train/TrainEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Train/TrainAttributes.h.inc"

#include "loom/Dialect/Train/TrainInterfaces.h.inc"

#define GET_OP_CLASSES
#include "loom/Dialect/Train/TrainOps.h.inc"

namespace loom::train {
/// The target of the nearest module at or above `op` that has one
/// (`train.target`, set by loom-set-target), or null.
TargetAttr getTarget(mlir::Operation *op);
} // namespace loom::train

#endif // LOOM_DIALECT_TRAIN_TRAINOPS_H
