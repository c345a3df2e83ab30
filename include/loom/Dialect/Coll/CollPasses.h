//===- CollPasses.h - coll and ZeRO passes ----------------------*- C++ -*-===//

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

/// Registers `loom-schedule-pipeline`: zero-selective-gather (when given a
/// budget), coll-bucket, coll-prefetch and coll-overlap-schedule with shared
/// device, memory-limit and distance options.
void registerSchedulePipeline();

} // namespace loom::coll

#endif // LOOM_DIALECT_COLL_COLLPASSES_H
