//===- InitAllDialects.h - register Loom's dialects -------------*- C++ -*-===//

#ifndef LOOM_INITALLDIALECTS_H
#define LOOM_INITALLDIALECTS_H

#include "loom/Dialect/Coll/CollDialect.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/IR/DialectRegistry.h"

namespace loom {

/// Adds every dialect Loom defines to `registry`.
inline void registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<coll::CollDialect, train::TrainDialect>();
}

} // namespace loom

#endif // LOOM_INITALLDIALECTS_H
