//===- CollPasses.h - passes on collectives ---------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_COLL_COLLPASSES_H
#define LOOM_DIALECT_COLL_COLLPASSES_H

#include "loom/Dialect/Coll/CollDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace loom::coll {

#define GEN_PASS_DECL
#include "loom/Dialect/Coll/CollPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Dialect/Coll/CollPasses.h.inc"

} // namespace loom::coll

#endif // LOOM_DIALECT_COLL_COLLPASSES_H
