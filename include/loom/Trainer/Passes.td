//===- Passes.td - the trainer's entry point ---------------*- tablegen -*-===//
//
// The compiled step's ABI: the entry point the trainer calls and the
// manifest it reads (runtime/include/loom/Runtime/StepManifest.h).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRAINER_PASSES_TD
#define LOOM_TRAINER_PASSES_TD

include "mlir/Pass/PassBase.td"

def TrainerRecordScheduledPeakPass
    : Pass<"trainer-record-scheduled-peak", "::mlir::ModuleOp"> {
  let summary = "Records the peak of the step the scheduler bounded";
  let description = [{
    On the sharded and scheduled step (train ops whole, as the scheduler
    sees them): the memory timeline's peak, for the trainer's manifest
    (`scheduled_peak_bytes`) beside the peak of the step as lowered.

    ```mlir
    func.func @step(...) -> (tensor<f32> {train.loss}, ...)
    // gets
    attributes {loom.scheduled_peak_bytes = 1599440 : i64}
    ```
  }];
}

def TrainerEntryPointPass : Pass<"trainer-entry-point", "::mlir::ModuleOp"> {
  let summary = "Adds @loom_step, the trainer's entry, and describes the step";
  let description = [{
    On the planned step (tensors, before bufferisation): adds
    `@loom_step(memref args..., memref results...)`, which calls the step
    and writes each result into its buffer, or, for a result
    `codegen-update-in-place` tied to an argument (`loom.tied_results`),
    into that argument's buffer; the step becomes private. The arena figures
    of the plan (`loom.arena_bytes`, `loom.arena_bound_bytes`) move to
    `@loom_step`, which the step is inlined into.

    The module gets `loom.step_manifest`, the manifest's text
    (StepManifest.h) without the figures lowering decides: per argument and
    result its role, name, element type, local shape and unpartitioned shape
    (`loom.full_shape`, from `zero-partition`), and whether it is written in
    place; the world size (the step's `coll.comm_world`), the ZeRO stage,
    the optimizer and learning rate `train-optimizer` recorded, the memory
    timeline's peak (`loom.timeline_peak_bytes`, or the timeline with
    caller-owned results without a plan), the scheduler's peak and the
    source file. Every argument and result must be a static tensor of f32,
    f64, bf16, i32 or i64 with a train role.

    ```mlir
    func.func @step(%w: tensor<64xf32> {train.param = "w"}, ...)
        -> (tensor<f32> {train.loss}, tensor<64xf32> {train.param = "w"})
    // becomes private, and
    func.func @loom_step(%a0: memref<64xf32>, ..., %r0: memref<f32>, %r1: memref<64xf32>) {
      %w = bufferization.to_tensor %a0 restrict : memref<64xf32> to tensor<64xf32>
      %loss, %nw = call @step(%w, ...)
      bufferization.materialize_in_destination %loss in restrict writable %r0
      bufferization.materialize_in_destination %nw in restrict writable %a0
      return
    }
    ```
  }];
  let options = [
    Option<"source", "source", "std::string", /*default=*/"\"\"",
           "the model file the manifest names (default: the module's "
           "location)">
  ];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect"];
}

def TrainerManifestPass : Pass<"trainer-manifest", "::mlir::ModuleOp"> {
  let summary = "Adds loom_step_packed and the manifest to the lowered step";
  let description = [{
    On the LLVM-dialect module: completes `loom.step_manifest` with the
    memory plan as lowered (`planned_arena_bytes`: the plan's arena and what
    `codegen-pack-buffers` packed; `planned_peak_bytes`: that and the
    buffers the trainer allocates; `unplanned_bytes`,
    `planned_arena_bound_bytes`) and emits the two symbols the trainer
    links against:

    ```mlir
    llvm.mlir.global external constant @loom_step_manifest("loom-step 1\0A...\00")
    // buffers[i]: the data pointer of @loom_step's i-th memref
    llvm.func @loom_step_packed(%buffers: !llvm.ptr) {
      ... one memref descriptor per buffer (pointer, offset 0, static
          sizes and row-major strides) ...
      llvm.call @loom_step(...)
      llvm.return
    }
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // LOOM_TRAINER_PASSES_TD
