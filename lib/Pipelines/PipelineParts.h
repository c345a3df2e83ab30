//===- PipelineParts.h - pieces the lowering pipelines share ----*- C++ -*-===//
//
// Private to lib/Pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_PIPELINES_PIPELINEPARTS_H
#define LOOM_LIB_PIPELINES_PIPELINEPARTS_H

#include "mlir/Pass/PassManager.h"
#include <string>

namespace loom::pipelines {

/// train-remat under `budgetMb` (and `activationBudget`) with `solver`, op
/// times from the module's target, a budget below its floor an error or
/// (`leanestBelowFloor`) its leanest step: the sharded step's, and the
/// unsharded one's.
void addTrainRemat(mlir::OpPassManager &pm, double budgetMb,
                   double activationBudget, const std::string &solver,
                   bool leanestBelowFloor);

/// One-shot bufferisation of the whole module, results with identity
/// layouts at function boundaries, then the deallocations.
void addBufferize(mlir::OpPassManager &pm);

/// The planned step to buffers, as both targets lower it: each op whose
/// result is inserted into a new tensor writes into it, bufferisation,
/// what it allocated outside the plan packed (with `memoryPlan`), and the
/// runtime kernels called.
void addStepBufferization(mlir::OpPassManager &pm, bool memoryPlan);

/// Affine, strided metadata and 16-bit floats the host cannot compute in
/// (x86 has no bf16 arithmetic and libgcc 12 no bf16 conversions: the ops
/// left in bf16 compute in f32, and the casts become integer code), down
/// to structured control flow in cf.
void addHostScalarLowering(mlir::OpPassManager &pm);

/// math, memref and everything else into the LLVM dialect. With
/// `countedAllocations`, memref.alloc and dealloc call the generic
/// allocation functions libloomtrainer counts.
void addToLLVM(mlir::OpPassManager &pm, bool countedAllocations);

} // namespace loom::pipelines

#endif // LOOM_LIB_PIPELINES_PIPELINEPARTS_H
