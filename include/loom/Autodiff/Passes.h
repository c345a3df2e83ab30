//===- Passes.h - autodiff and the optimizer --------------------*- C++ -*-===//

#ifndef LOOM_AUTODIFF_PASSES_H
#define LOOM_AUTODIFF_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace loom::autodiff {

#define GEN_PASS_DECL
#include "loom/Autodiff/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Autodiff/Passes.h.inc"

} // namespace loom::autodiff

#endif // LOOM_AUTODIFF_PASSES_H
