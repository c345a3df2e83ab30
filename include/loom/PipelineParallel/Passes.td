//===- Passes.td - pipeline parallelism --------------------*- tablegen -*-===//
//
// Splitting a training step into pipeline stages.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PIPELINEPARALLEL_PASSES_TD
#define LOOM_PIPELINEPARALLEL_PASSES_TD

include "mlir/Pass/PassBase.td"

def PPPartitionPass : Pass<"pp-partition", "::mlir::ModuleOp"> {
  let summary = "Splits a training step into pipeline stages, one program "
                "per stage running a schedule over the microbatches";
  let description = [{
    Runs on a training step (after `train-microbatch`, `train-autodiff` and
    `train-optimizer`, before `zero-partition`) and replaces it by one
    function per stage, `@<step>_stage<s>` tagged `train.pipeline_stage = s`
    and `train.pipeline = #train.pipeline<stages, microbatches, replicas,
    schedule, layout>`.

    *Units and stages.* Parameters are grouped into units as Megatron's
    layouts count them: `E` (parameters outside a numbered group that the
    forward reads before the first block: the embedding), one `t` per
    numbered group (`layers.3.*`), and `L` (the others: final norm, output
    projection, whose stage also computes the loss). `layout` assigns units
    to stages in Megatron's syntax (`"Et*3|t*4|t*4|t*3L"`); without it the
    units are cut into the contiguous stages that minimise the busiest
    stage's time on the module's target (forward, backward and
    optimizer ops counted). A forward op belongs to the latest unit among
    its operands', a backward op to its forward op's (train-autodiff gives
    adjoint ops the forward op's location). Ops reading only constants,
    inputs and optimizer state are cloned into each stage that uses them.

    *Schedules* (`schedule`), per stage `s` of `P`, over `M` microbatches:
    `gpipe` runs every forward, then every backward; `1f1b` runs
    `min(P - s - 1, M)` forwards, then alternates one forward and one
    backward, then the rest of the backwards; `zb-h1` is `1f1b` with each
    backward split into `I` (the ops whose results another stage receives,
    and what they read in the same backward) then `W` (the weight
    gradients), the cool-down phase's `W`s deferred to the end of the
    stage. Ops of no single microbatch (gradient accumulation, the loss's
    sum, the optimizer) run as soon as their operands exist. Each op gets
    `train.action = "F3"` (or `B`, `I`, `W`), which `coll-report` and the
    schedule traces read.

    *Transfers.* A value read on another stage is sent right after it is
    computed and received right before its first use:

    ```mlir
    // stage 0
    %h = linalg.add ins(%a, %b : ...) outs(...) {train.action = "F0"}
    %s = coll.send_start %h on %pp to = 1 tag = 0
        : (tensor<4x8x16xf32>, !coll.comm<2>) -> !coll.future<tensor<0xf32>>
    ...
    %g = coll.recv_start on %pp from = 1 tag = 0 : (!coll.comm<2>) -> !coll.future<tensor<4x8x16xf32>>
    %gh = coll.wait %g : !coll.future<tensor<4x8x16xf32>>
    %done = coll.wait %s : !coll.future<tensor<0xf32>>
    ```

    Between two stages, values are received in the order they are sent (the
    tag is the message's index). A send is waited right after the first
    message received from its peer that the peer sends after its first use
    of the sent value (an activation's send once the peer's next message
    after that forward is back, a gradient's once the peer's next forward's
    activation is), else at the end: the peer has received the value by
    then, so sends never wait for their receiver, and a schedule that is
    valid with buffered transfers cannot deadlock.

    The last stage returns the loss (the other stages return none), each
    stage its parameters' and their state's updates; a shared counter's
    update is returned by every stage that reads the counter. A layout that
    does not list the step's units, fewer units than stages, or collectives
    already in the step are errors.

    *Tied parameters.* A parameter read on another stage than its own (a
    tied embedding: the table on stage 0, the output projection on the
    last) is sent there at the start of the step, a `tensor.cast` of it
    sent as an activation is; that stage sends back the gradient it
    computes for it, which is added to the home stage's before the one
    update. The weight's optimizer state stays on its stage.

    *Replicas.* With `replicas = D`, the job is a grid of `stages * D`
    ranks, rank `s * D + d` running stage `s` of replica `d`. The transfers
    run on the replica's pipeline, `coll.comm_group %world size = P
    stride = D`, whose ranks are the stages; `zero-partition{world-size=D}`
    then shards each stage over its `D` replicas.

    ```mlir
    %world = coll.comm_world : !coll.comm<4>
    %pp = coll.comm_group %world size = 2 stride = 2
        : !coll.comm<4> -> !coll.comm<2>
    ```
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "Pipeline stages">,
    Option<"replicas", "replicas", "int64_t", /*default=*/"1",
           "Data-parallel replicas of the pipeline (the world is stages x "
           "replicas ranks)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b or zb-h1">,
    Option<"layout", "layout", "std::string", /*default=*/"\"\"",
           "Units per stage in Megatron's syntax (E, t, L, *N, |); empty: "
           "balance on the cost model">,
    Option<"forwardOnly", "forward-only", "bool", /*default=*/"false",
           "Partition a forward (the trainer's evaluation step: its F "
           "actions alone) rather than a differentiated step; give the "
           "training step's layout, so that each stage holds the same "
           "parameters">,
  ];
  let dependentDialects = ["::loom::coll::CollDialect",
                           "::mlir::tensor::TensorDialect"];
}

def PPSplitStagesPass : Pass<"pp-split-stages", "::mlir::ModuleOp"> {
  let summary = "Moves each pipeline stage's functions into a module of its "
                "own";
  let description = [{
    After `pp-partition`, each stage is compiled on its own: its step, its
    memory plan, its arena. This pass gives every stage `s` a nested
    `builtin.module @stage<s>` tagged `train.pipeline_stage = s`, holding the
    functions tagged with that stage and a copy of every function tagged
    with none, so that the later phases run on each stage's module with a
    nested pass manager (`builtin.module(builtin.module(...))`). Each stage
    module carries a copy of the module's `train.target`, so a stage
    compiles for the same target on its own. The stages are linked again
    after lowering by `pp-link-stages`.

    ```mlir
    func.func @step_stage0(...) attributes {train.pipeline_stage = 0 : i64}
    func.func @step_stage1(...) attributes {train.pipeline_stage = 1 : i64}
    // becomes
    module @stage0 attributes {train.pipeline_stage = 0 : i64} {
      func.func @step_stage0(...) attributes {train.pipeline_stage = 0 : i64}
    }
    module @stage1 attributes {train.pipeline_stage = 1 : i64} {
      func.func @step_stage1(...) attributes {train.pipeline_stage = 1 : i64}
    }
    ```

    A module without stage functions is left as it is. Stage numbers that
    do not run from 0 without a gap, or a module with other operations than
    functions beside them, are errors.
  }];
}

def PPLinkStagesPass : Pass<"pp-link-stages", "::mlir::ModuleOp"> {
  let summary = "Links the lowered stage modules into one trainer module";
  let description = [{
    The inverse of `pp-split-stages`, on the LLVM dialect: the operations of
    every nested `module @stage<s>` move into the enclosing module, so that
    one object holds every stage and the trainer picks its rank's.

    - Stage `s`'s `loom_step_packed` and `loom_step_manifest` become
      `loom_step_packed_stage<s>` and `loom_step_manifest_stage<s>`; every
      other symbol a stage defines gets the suffix `_stage<s>` and internal
      linkage (private stays private), its uses renamed with it.
    - Declarations (the runtime's and libraries' functions) are shared: one
      declaration per name, and two stages that declare one name with
      different types are an error.
    - `loom_pipeline_stages` (the count) and the tables
      `loom_pipeline_packed` and `loom_pipeline_manifests` (each stage's
      entry point and manifest, by stage) are added.

    ```mlir
    module @stage0 attributes {train.pipeline_stage = 0 : i64} {
      llvm.func @loom_step_packed(%arg0: !llvm.ptr) { ... }
    }
    // becomes
    llvm.func @loom_step_packed_stage0(%arg0: !llvm.ptr) { ... }
    llvm.mlir.global external constant @loom_pipeline_stages(2 : i64) : i64
    llvm.mlir.global external constant @loom_pipeline_packed()
        : !llvm.array<2 x ptr> { ... llvm.mlir.addressof ... }
    ```

    The module's data layout and target triple come from the stages, which
    must agree.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // LOOM_PIPELINEPARALLEL_PASSES_TD
