//===- TrainDialect.h - train dialect ---------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_TRAIN_TRAINDIALECT_H
#define LOOM_DIALECT_TRAIN_TRAINDIALECT_H

#include "mlir/IR/Dialect.h"

#include "loom/Dialect/Train/TrainOpsDialect.h.inc"

#endif // LOOM_DIALECT_TRAIN_TRAINDIALECT_H
