//===- CollPasses.td - passes on collectives ---------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_COLL_COLLPASSES_TD
#define LOOM_DIALECT_COLL_COLLPASSES_TD

include "mlir/Pass/PassBase.td"

def CollBucketPass : Pass<"coll-bucket", "::mlir::func::FuncOp"> {
  let summary = "Merges small collectives into buckets without losing overlap";
  let description = [{
    Reduce-scatters of flat buffers (as `zero-partition` emits them) on the
    same communicator, element type and reduction are merged, in the order
    their inputs become ready, into buckets of at most `bucket-mb`. The first
    bucket is at most `first-bucket-mb`, so the first gradients leave early.
    A bucket launches right after its *last* member's input is produced in
    the current order, not when the last parameter in declaration order is.
    A member joins the open bucket only if, in the simulated timeline
    (the module's target, `loom-set-target`), the merged collective launched there still finishes before
    the earliest member's wait is reached. So merging never exposes a
    collective that was hiding under compute. The merged buffer is laid out
    rank-major (`[N, sum of S_i]`), so each rank's block is the
    concatenation of every member's block.

    All-gathers are merged only when their starts are adjacent and their
    releases are adjacent, so merging changes neither timing nor memory.
    Such groups arise when parameters are gathered together for one use and
    released together.

    ```mlir
    // before: two reduce-scatters of gradients ready one after the other
    %f1 = coll.reduce_scatter_start %g1 ... -> !coll.future<tensor<3xf32>>
    %f2 = coll.reduce_scatter_start %g2 ... -> !coll.future<tensor<5xf32>>
    // after: one, launched after %g2 exists; each result is a slice
    %b  = coll.reduce_scatter_start %concat ... -> !coll.future<tensor<8xf32>>
    %w  = coll.wait %b ...
    %r1 = tensor.extract_slice %w[0] [3] [1] ...
    %r2 = tensor.extract_slice %w[3] [5] [1] ...
    ```
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"25",
           "largest bucket, MiB">,
    Option<"firstBucketMb", "first-bucket-mb", "double", /*default=*/"1",
           "largest first bucket, MiB">,
  ];
  let dependentDialects = ["::loom::coll::CollDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CollPrefetchPass : Pass<"coll-prefetch", "::mlir::func::FuncOp"> {
  let summary = "Starts all-gathers earlier without raising peak memory";
  let description = [{
    DeepCompile-style prefetching. Each all-gather start moves up, up to
    `distance` ops, and across layer boundaries and from the backward into
    the forward when that is where it lands. It stops at the first of:
    * its operands' definitions;
    * the previous all-gather or broadcast on its communicator (their
      relative order is kept);
    * a reduce-scatter or all-reduce on its communicator, unless
      `overtake` is set: then the gather may pass it and the in-order
      stream runs the gather first;
    * the first op where the live bytes plus the gathered buffer would
      exceed the limit: the block's original peak plus `budget-mb`.

    Every op the move spans gets the buffer's bytes added exactly, so the
    result never exceeds the limit. Overtaking delays the collectives it
    passes, so with `overtake` both orders are simulated on the target and
    the overtaking one is kept only if it is faster. Without `overtake` no
    collective is issued later than before. Every rank derives the same
    order.

    ```mlir
    // before                              // after
    %y = linalg.matmul ...                 %f = coll.all_gather_start %w ...
    %f = coll.all_gather_start %w ...      %y = linalg.matmul ...
    %g = coll.wait %f ...                  %g = coll.wait %f ...
    ```
  }];
  let options = [
    Option<"distance", "distance", "unsigned", /*default=*/"200",
           "furthest a start moves, in ops">,
    Option<"budgetMb", "budget-mb", "double", /*default=*/"0",
           "memory above the original peak prefetching may use, MiB">,
    Option<"overtake", "overtake", "bool", /*default=*/"true",
           "let gathers pass reduce-scatters and all-reduces where faster">,
  ];
}

def CollOverlapSchedulePass : Pass<"coll-overlap-schedule", "::mlir::func::FuncOp"> {
  let summary = "Overlaps collectives with compute under a hard memory limit";
  let description = [{
    Keeps the order of compute and retimes the collectives around it. It
    starts from the synchronous order (every collective waited right after
    its start, gathers at their first use, reductions at their inputs: the
    least memory retiming collectives reaches) and spends at most the limit
    on overlap: `memory-limit-mb` when given, else the synchronous peak
    times `1 + memory-headroom`. A limit below the synchronous peak is an
    error that names that peak. Two orders are built, simulated on the
    module's target (`loom-set-target`):

    * gathers first: all-gather starts move up (`coll-prefetch` with
      overtaking, where faster) while every op they pass stays within the
      limit, then reductions;
    * reductions first: each reduce-scatter and all-reduce wait that stalls
      sinks towards where its collective is done (never past a use of its
      result), while every op it passes, holding the gradient longer,
      stays within the limit; then gathers, then waits again.

    Each is checked on the full memory timeline; one over the limit is
    dropped with a remark. The faster order within the limit wins (on a tie
    the smaller peak), against the synchronous order and the input order
    too. So the peak never exceeds the limit and the simulated makespan is
    never longer than the synchronous order's, nor than the input order's
    when that is within the limit. The pass is deterministic, so every rank
    derives the same order. Its cost is a fixed number of linear sweeps and
    simulations (at most 8 rounds of wait sinking per order), plus
    `distance` per all-gather.

    ```mlir
    // synchronous                            // after
    %r = coll.reduce_scatter_start %dw ...     %r = coll.reduce_scatter_start %dw ...
    %s = coll.wait %r ...                      %f = coll.all_gather_start %w0 ...
    %y = linalg.matmul ...                     %y = linalg.matmul ...
    %f = coll.all_gather_start %w0 ...         %s = coll.wait %r ...   // done by now
    %g = coll.wait %f ...                      %g = coll.wait %f ...
    %x = linalg.matmul ins(%g ...)             %x = linalg.matmul ins(%g ...)
    ```
  }];
  let options = [
    Option<"memoryLimitMb", "memory-limit-mb", "double", /*default=*/"0",
           "the step's peak may not exceed this, MiB (0: the synchronous "
           "peak plus the headroom)">,
    Option<"memoryHeadroom", "memory-headroom", "double",
           /*default=*/"0.05", "without a limit: the fraction above the "
           "synchronous order's peak overlap may use">,
    Option<"synchronousBelowFloor", "synchronous-below-floor", "bool",
           /*default=*/"false", "a memory-limit-mb below the synchronous "
           "order's peak keeps that order (with a remark) instead of "
           "failing">,
    Option<"distance", "distance", "unsigned", /*default=*/"200",
           "furthest an all-gather start moves, in ops">,
  ];
}

def CollReportPass : Pass<"coll-report", "::mlir::ModuleOp"> {
  let summary = "Reports simulated time, overlap and memory of a step";
  let description = [{
    For each function (or the one named by `function`), runs the memory
    timeline and the stream simulator on the module's target
    (`train.target`, set by `loom-set-target`; with its profile, a table of
    predicted against measured times) and prints a table to stderr, headed
    by the target it used. Optionally it writes:
    * `json`: the figures, including `peak_bytes`, `makespan_us`,
      `compute_us`, `comm_us`, `exposed_comm_us`, `lower_bound_us`,
      `num_collectives` per kind and `num_ops`;
    * `trace`: a Chrome-trace/Perfetto JSON of the simulated compute and
      communication streams;
    * `plot`: an SVG of live memory over simulated time.

    A module of pipeline stages (`pp-partition`'s functions tagged
    `train.pipeline_stage`) is reported as one pipeline unless `function`
    names a stage: the stages run together, each receive waiting for its
    sender's send, and the table gives each stage's peak memory, compute,
    stalled time and finish, the makespan and the bubble (the stages' idle
    share, 1 - their compute / (P x makespan)) beside the textbook
    (P-1)/(M+P-1). Then `json` holds those figures, `trace` one
    process per stage with one event per schedule action (`F3`, `B0`, `I2`,
    `W1`, stalls), and `plot` the schedule grid as an SVG.

    The IR is not changed.

    ```sh
    loom-opt step.mlir --loom-set-target=device=h100-ib \
        --coll-report="json=r.json trace=t.json plot=m.svg" -o /dev/null
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"\"",
           "report only this function">,
    Option<"jsonPath", "json", "std::string", /*default=*/"\"\"",
           "write the figures as JSON here">,
    Option<"tracePath", "trace", "std::string", /*default=*/"\"\"",
           "write a Chrome trace of the simulated streams here">,
    Option<"plotPath", "plot", "std::string", /*default=*/"\"\"",
           "write an SVG plot of memory over time here">,
    Option<"checkTracker", "check-tracker", "bool", /*default=*/"false",
           "replay the order through the incremental MemoryTracker and fail "
           "if it disagrees with the timeline at any op (a self-check)">,
  ];
}

def CollReorderBaselinePass : Pass<"coll-reorder-baseline", "::mlir::func::FuncOp"> {
  let summary = "Reorders collectives as the orders users run, for comparison";
  let description = [{
    The orders the overlap scheduler is measured against. Only collective
    starts and waits move (and `fsdp` merges collectives); compute keeps its
    order.

    * `synchronous`: every `coll.wait` right after its start. Nothing is in
      flight while compute runs, so no buffer lives longer than the step
      needs it: the memory-minimal order, and the reference for peaks.
    * `fsdp`: PyTorch FSDP's policy (FSDP2's defaults with each transformer
      block wrapped), with its flat collectives. A parameter's unit is its
      `train.param` name up to the first numeric component
      (`layers.3.attn.wq` is in `layers.3`; names without one are the root
      unit). A unit issues one all-gather per use (its parameters' first
      gathers, the forward's, then their second, the backward's) and one
      reduce-scatter of its gradients (those whose shards reach its updated
      parameters), launched once the last of them exists; in ZeRO-1/2 the
      gathers of its updated parameters are one too. Merging is
      `coll-bucket`'s rank-major layout: the shards are concatenated, each
      parameter is copied out of the gathered buffer (FSDP2's copy-out),
      which is then released, and each gradient's shard is a slice of the
      merged result. A use's gather starts when the previous use's compute
      starts and is waited before its own compute, so at most two gathered
      units are alive. A reduce-scatter (or all-reduce) is waited when the
      next unit's backward ends (before the compute of the use after next).
    * `original`: no change (`zero-partition`'s order: gathers synchronous,
      reduce-scatters waited at the optimizer update).
    * `sink-waits`: every wait moves down to just before the first use of
      its result.
    * `eager-prefetch`: every all-gather start moves up as far as its
      operands allow, in original order, and waits sink. This is the
      aggressive policy that raised peak memory by 60% in Inductor's overlap
      scheduler: every gathered parameter is live from the top of the step.

    ```mlir
    // fsdp: layers.1's gathers (wq, 64 elements, and wk, 32, on 4 ranks)
    // are one, started as layers.0 computes
    %g0 = coll.wait %f0 ...                         // layers.0
    %s1 = tensor.concat dim(0) %wq1, %wk1 : (tensor<16xf32>, tensor<8xf32>) -> tensor<24xf32>
    %f1 = coll.all_gather_start %s1 ... -> !coll.future<tensor<96xf32>>
    %y0 = linalg.matmul ins(%x, %q0 ...)           // layers.0's compute
    %g1 = coll.wait %f1 ...
    %m1 = tensor.expand_shape %g1 [[0, 1]] output_shape [4, 24] ...
    %c1 = tensor.extract_slice %m1[0, 0] [4, 16] [1, 1] ...
    %q1 = linalg.copy ins(%c1 ...) outs(...)       // layers.1.wq, copied out
    ...                                            // and layers.1.wk
    coll.release %g1 : tensor<96xf32>
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"original\"",
           "synchronous, fsdp, original, sink-waits or eager-prefetch">,
  ];
  let dependentDialects = ["::loom::coll::CollDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // LOOM_DIALECT_COLL_COLLPASSES_TD
