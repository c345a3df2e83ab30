//===- TrainOps.h - train operations ----------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_TRAIN_TRAINOPS_H
#define LOOM_DIALECT_TRAIN_TRAINOPS_H

#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"

#define GET_OP_CLASSES
#include "loom/Dialect/Train/TrainOps.h.inc"

#endif // LOOM_DIALECT_TRAIN_TRAINOPS_H
