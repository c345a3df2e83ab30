//===- Passes.h - the trainer's entry point (trainer-*) ---------*- C++ -*-===//

#ifndef LOOM_TRAINER_PASSES_H
#define LOOM_TRAINER_PASSES_H

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

namespace loom::trainer {

#define GEN_PASS_DECL
#include "loom/Trainer/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Trainer/Passes.h.inc"

/// The training step of `module`: its one function with a `train.loss`
/// result (null if there is none).
mlir::func::FuncOp findStep(mlir::ModuleOp module);

} // namespace loom::trainer

#endif // LOOM_TRAINER_PASSES_H
