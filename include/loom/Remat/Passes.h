//===- Passes.h - rematerialisation (train-remat) ---------------*- C++ -*-===//

#ifndef LOOM_REMAT_PASSES_H
#define LOOM_REMAT_PASSES_H

#include "mlir/Pass/Pass.h"

namespace loom::remat {

#define GEN_PASS_DECL
#include "loom/Remat/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Remat/Passes.h.inc"

} // namespace loom::remat

#endif // LOOM_REMAT_PASSES_H
