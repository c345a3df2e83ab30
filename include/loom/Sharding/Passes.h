//===- Passes.h - ZeRO sharding (zero-*) ------------------------*- C++ -*-===//

#ifndef LOOM_SHARDING_PASSES_H
#define LOOM_SHARDING_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace loom::sharding {

#define GEN_PASS_DECL
#include "loom/Sharding/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Sharding/Passes.h.inc"

} // namespace loom::sharding

#endif // LOOM_SHARDING_PASSES_H
