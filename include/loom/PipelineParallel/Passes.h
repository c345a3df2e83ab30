//===- Passes.h - pipeline parallelism (pp-partition) ----------*- C++ -*-===//

#ifndef LOOM_PIPELINEPARALLEL_PASSES_H
#define LOOM_PIPELINEPARALLEL_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"

namespace loom::pp {

/// Moves the LLVM-dialect definitions of `nested` (a module nested in the
/// one `linked` is the table of) into the enclosing module and erases
/// `nested`: each symbol it defines gets `suffix` and internal linkage, but
/// its entry point and manifest (loom_step_packed, loom_step_manifest) or,
/// for a linked pipeline, its tables of them (loom_pipeline_stages,
/// loom_pipeline_packed, loom_pipeline_manifests), which keep external
/// linkage; its declarations merge with the enclosing
/// module's. `what` begins each error. pp-link-stages links each
/// stage so, and loomc the evaluation step (--eval, suffix _eval).
mlir::LogicalResult linkNestedModule(mlir::ModuleOp nested,
                                     llvm::StringRef suffix,
                                     llvm::StringRef what,
                                     mlir::SymbolTable &linked);

#define GEN_PASS_DECL
#include "loom/PipelineParallel/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/PipelineParallel/Passes.h.inc"

} // namespace loom::pp

#endif // LOOM_PIPELINEPARALLEL_PASSES_H
