//===- Passes.h - the target a step is compiled for -------------*- C++ -*-===//

#ifndef LOOM_TARGET_PASSES_H
#define LOOM_TARGET_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace loom::target {

#define GEN_PASS_DECL
#include "loom/Target/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Target/Passes.h.inc"

} // namespace loom::target

#endif // LOOM_TARGET_PASSES_H
