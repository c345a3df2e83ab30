//===- Passes.h - GPU codegen (gpu-*) ---------------------------*- C++ -*-===//

#ifndef LOOM_CODEGEN_GPU_PASSES_H
#define LOOM_CODEGEN_GPU_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace loom::codegen {

#define GEN_PASS_DECL
#include "loom/Codegen/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Codegen/GPU/Passes.h.inc"

} // namespace loom::codegen

#endif // LOOM_CODEGEN_GPU_PASSES_H
