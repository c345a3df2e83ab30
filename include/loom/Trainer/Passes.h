//===- Passes.h - the trainer's entry point (trainer-*) ---------*- C++ -*-===//

#ifndef LOOM_TRAINER_PASSES_H
#define LOOM_TRAINER_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

namespace loom::runtime {
struct StepManifest;
} // namespace loom::runtime
namespace loom::train {
class StepManifestAttr;
} // namespace loom::train

namespace loom::trainer {

#define GEN_PASS_DECL
#include "loom/Trainer/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Trainer/Passes.h.inc"

/// The training step of `module`: its one function with a `train.loss`
/// result, or a pipeline stage's (`train.pipeline_stage`, which only the last
/// stage's has), or null.
mlir::func::FuncOp findStep(mlir::ModuleOp module);

/// The step's predicted peak, what the trainer allocates for it: the memory
/// plan's timeline (train.timeline_peak_bytes) or, without a plan, the same
/// timeline of the step as it will be lowered (results in the trainer's
/// buffers).
int64_t getPredictedPeakBytes(mlir::func::FuncOp step);

/// The runtime's form of `manifest` (StepManifest.h): the properties the
/// tensor-level step decided (trainer-entry-point) and its tensors, without
/// the figures lowering adds (trainer-manifest).
runtime::StepManifest getRuntimeManifest(train::StepManifestAttr manifest);

} // namespace loom::trainer

#endif // LOOM_TRAINER_PASSES_H
