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
    attributes {train.scheduled_peak_bytes = 1599440 : i64}
    ```
  }];
}

def TrainerEntryPointPass : Pass<"trainer-entry-point", "::mlir::ModuleOp"> {
  let summary = "Adds @loom_step, the trainer's entry, and describes the step";
  let description = [{
    On the planned step (tensors, before bufferisation): adds
    `@loom_step(memref args..., memref results...)`, which calls the step
    and writes each result into its buffer, or, for a result
    `codegen-update-in-place` tied to an argument (`train.tied_results`),
    into that argument's buffer; the step becomes private. The arena figures
    of the plan (`train.arena_bytes`, `train.arena_bound_bytes`) move to
    `@loom_step`, which the step is inlined into.

    The module gets `train.step_manifest = #train.step_manifest<...>`, the
    trainer's manifest without the figures lowering decides: per argument
    and result (`#train.manifest_tensor`) its role, name, local type and
    unpartitioned shape (`train.full_shape`, from `zero-partition`), and
    whether it is written in place; the world size (the step's
    `coll.comm_world`), the ZeRO stage, a pipeline stage's place in its
    grid, the optimizer and learning rate `train-optimizer` recorded, the
    memory timeline's peak (`train.timeline_peak_bytes`, or the timeline
    with caller-owned results without a plan), the scheduler's peak and the
    source file. Every argument and result must be a static tensor of f32,
    f64, bf16, i32 or i64 with a train role and a name without blanks.

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
    On the LLVM-dialect module: turns `train.step_manifest` into the text
    the trainer parses (runtime/include/loom/Runtime/StepManifest.h) and
    completes it with the memory plan as lowered (`planned_arena_bytes`: the plan's arena and what
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

def TrainerStampOpIdsPass : Pass<"trainer-stamp-op-ids", "::mlir::ModuleOp"> {
  let summary = "Numbers the step's ops for profiles";
  let description = [{
    Gives every top-level op of every function (terminators included) an
    id, in order, counting on across functions, by naming its location
    `loom.op.<id>`; an id the op had is replaced. The sharding pipeline runs it after `zero-partition`
    and before any scheduling, so an op keeps its id whichever order the
    collectives end up in, and a recompilation numbers the same model the
    same way. A trainer's profile (`--profile`) is keyed by these ids;
    `loomc --profile`, the scheduler and `coll-report` read it back
    (`loom/Analysis/OpIds.h`).

    Locations rather than attributes: lowering keeps an op's location on
    what it becomes (the BLAS call, the loop nest, the kernel launch) and
    fusion merges them, where a discardable attribute would be dropped.
    Print the IR with `-mlir-print-debuginfo` to keep them in a file.

    ```mlir
    %0 = linalg.matmul ins(%a, %b : ...) outs(%c : ...) -> tensor<8x16xf32> loc(#loc)
    // becomes
    %0 = linalg.matmul ins(%a, %b : ...) outs(%c : ...) -> tensor<8x16xf32> loc(#loc3)
    #loc3 = loc("loom.op.3"(#loc))
    ```
  }];
}

def TrainerProfileProbesPass
    : Pass<"trainer-profile-probes", "::mlir::ModuleOp"> {
  let summary = "Times each op id of the lowered step, for --profile";
  let description = [{
    On the lowered step (buffers; loops, BLAS and kernel calls, kernel
    launches; before control flow is flattened): brackets each run of
    top-level ops that carry the same op ids (`trainer-stamp-op-ids`) with
    `loomrt_op_begin(id)` and `loomrt_op_end(id)`. The runtime times the
    bracket when the trainer profiles (a clock on the CPU, events on the
    GPU's compute stream) and returns at once when it does not. Ops with no
    work of their own (allocations, views, constants) neither start nor end
    a run. A collective's start and wait calls end one; with
    `collective-calls` each is bracketed on its own, under its op's id, so
    that the profile has what they cost the host (a wait's stall taken
    out), and the runtime times the collective itself on its stream. A run
    whose location holds several ids (fused ops) is timed under its first
    id, and `loomrt_op_fused(member, first)` tells the profile which ids it
    covered.

    ```mlir
    scf.for ... { ... } loc("loom.op.3"(...))
    func.call @cblas_sgemm(...) loc("loom.op.4"(...))
    // becomes
    func.call @loomrt_op_begin(%c3) : (i64) -> ()
    scf.for ... { ... }
    func.call @loomrt_op_end(%c3) : (i64) -> ()
    func.call @loomrt_op_begin(%c4) : (i64) -> ()
    func.call @cblas_sgemm(...)
    func.call @loomrt_op_end(%c4) : (i64) -> ()
    ```
  }];
  let options = [
    Option<"collectiveCalls", "collective-calls", "bool", /*default=*/"true",
           "time the calls that start and wait for collectives (the CPU "
           "target; a GPU's calls only enqueue)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // LOOM_TRAINER_PASSES_TD
