//===- TrainPasses.h - train passes -----------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_TRAIN_TRAINPASSES_H
#define LOOM_DIALECT_TRAIN_TRAINPASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"

namespace loom::train {

#define GEN_PASS_DECL
#include "loom/Dialect/Train/TrainPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Dialect/Train/TrainPasses.h.inc"

} // namespace loom::train

#endif // LOOM_DIALECT_TRAIN_TRAINPASSES_H
