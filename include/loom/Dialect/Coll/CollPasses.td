//===- CollPasses.td - coll and ZeRO passes ----------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_COLL_COLLPASSES_TD
#define LOOM_DIALECT_COLL_COLLPASSES_TD

include "mlir/Pass/PassBase.td"

def ZeroPartitionPass : Pass<"zero-partition", "::mlir::ModuleOp"> {
  let summary = "Shards a training step ZeRO-style over a communicator";
  let description = [{
    Rewrites every training step (a function with a `train.loss` result, after
    `train-autodiff`, with or without `train-optimizer`) into the program one
    rank runs in a data-parallel job of `world-size` ranks. The IR's inputs
    are that rank's micro-batch. Each parameter, gradient or state tensor of
    E elements is sharded as a flat `tensor<S>` with `S = ceil(E / N)`. Rank
    r owns elements `[r S, (r + 1) S)` of the flattened tensor padded with
    zeros to `N S`. Padding is zero, stays zero under the update, and is
    sliced off before any value is used.

    * stage 3: parameters, gradients and optimizer state are sharded. Before
      the forward's uses of a parameter, and again before the backward's, the
      pass inserts `all_gather_start` + `coll.wait`, and `coll.release` after
      the region's last use. Gradients are reduce-scattered into shards as
      soon as they exist, and the optimizer updates shards.
    * stage 1: parameters stay whole and optimizer state is sharded. Each
      rank updates its own slice of a parameter (`coll.comm_rank`), and the
      updated slices are all-gathered into the new parameter. The full
      gradient is released at the end of the step.
    * stage 2: as stage 1, but the full gradient is released as soon as its
      reduce-scatter has started.

    The returned loss is all-reduced (`avg`) so every rank reports the
    global-batch mean. With `world-size=1` every collective folds away under
    `-canonicalize` and the step computes exactly what it did before.

    ```mlir
    // stage 3, before a use of %w : tensor<64x64xf32> on 4 ranks:
    %f = coll.all_gather_start %w_shard on %comm gather_axis = 0
        : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<4096xf32>>
    %flat = coll.wait %f : !coll.future<tensor<4096xf32>>
    %w = tensor.expand_shape %flat [[0, 1]] output_shape [64, 64] ...
    ... uses of %w ...
    coll.release %flat : tensor<4096xf32>
    ```
  }];
  let options = [
    Option<"stage", "stage", "unsigned", /*default=*/"3",
           "ZeRO stage: 1 (optimizer state), 2 (+ gradients), 3 (+ parameters)">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"0",
           "number of ranks (required)">,
    Option<"reduction", "reduction", "std::string", /*default=*/"\"avg\"",
           "how gradients combine across ranks: avg or sum">,
  ];
  let dependentDialects = [
    "::loom::coll::CollDialect", "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"
  ];
}

def ZeroSelectiveGatherPass : Pass<"zero-selective-gather", "::mlir::ModuleOp"> {
  let summary = "Keeps chosen parameters gathered from forward to backward";
  let description = [{
    DeepCompile's selective unsharding, on the output of
    `zero-partition{stage=3}`. A parameter that the forward and the backward
    both gather is gathered twice. Keeping the forward's gathered copy alive
    until the backward's last use saves the second gather, at the cost of
    holding its bytes in between. The pass ranks such parameters by gather
    time per byte (the cost model's estimate for `device`; small parameters
    are latency-bound and win) and keeps them while the kept bytes fit in
    `budget-mb`. Ties go to the earlier parameter, so every rank makes the
    same choice.

    ```mlir
    // before: the backward gathers %w again
    %w1 = coll.wait %f1 ...    ... forward uses ...    coll.release %w1
    %w2 = coll.wait %f2 ...    ... backward uses ...   coll.release %w2
    // after: one gather; the release moves to the backward's last use
    %w1 = coll.wait %f1 ...    ... forward uses ...    ... backward uses ...
    coll.release %w1
    ```
  }];
  let options = [
    Option<"budgetMb", "budget-mb", "double", /*default=*/"0",
           "memory for parameters kept gathered, in MiB">,
    Option<"device", "device", "std::string", /*default=*/"\"h100-nvlink\"",
           "device description (a name in devices/ or a .json path)">,
  ];
  let dependentDialects = ["::loom::coll::CollDialect"];
}

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
    (`device`), the merged collective launched there still finishes before
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
    Option<"device", "device", "std::string", /*default=*/"\"h100-nvlink\"",
           "device description for the overlap check">,
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
    passes, so with `overtake` both orders are simulated on `device` and
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
    Option<"device", "device", "std::string", /*default=*/"\"h100-nvlink\"",
           "device description for the overtaking check">,
  ];
}

def CollOverlapSchedulePass : Pass<"coll-overlap-schedule", "::mlir::func::FuncOp"> {
  let summary = "Retimes collectives for overlap under a hard memory limit";
  let description = [{
    Keeps the order of compute and schedules the collectives around it,
    within the limit (the original peak plus `memory-headroom-mb`, or
    `memory-limit-mb` when given), simulating on `device`:

    1. All-gather starts move earlier (`coll-prefetch` with `overtake`)
       into the original order's headroom.
    2. Every reduce-scatter and all-reduce wait moves up to the first op the
       compute stream reaches after the collective has finished. Waiting
       there never stalls, and it frees the collective's input (a full
       gradient) as early as that is free; moving a wait up never raises
       memory. A moved wait that stalls goes back.
    3. Gathers move again, into the memory step 2 freed. They may now pass
       more reduce-scatters and delay them, so waits that stall sink to
       where their collective is done (never past a use). This order is
       kept only if the simulation finds it faster than step 2's (or as
       fast with a smaller peak): a gather that overtakes too much leaves
       the stream a backlog of reduce-scatters at the end of the step.

    Finally the result is checked: if it is slower than the original order
    or over max(limit, original peak), the original order stands. So the
    limit is hard and the simulated makespan never grows. The pass is
    deterministic, so every rank derives the same order. Its cost is a
    fixed number of linear sweeps and simulations, plus `distance` per
    all-gather.

    ```mlir
    // before                                 // after
    %r = coll.reduce_scatter_start %dw ...     %r = coll.reduce_scatter_start %dw ...
    %y = linalg.matmul ...                     %f = coll.all_gather_start %w0 ...
    %s = coll.wait %r ...                      %y = linalg.matmul ...
    %f = coll.all_gather_start %w0 ...         %s = coll.wait %r ...   // done by now
    %x = linalg.matmul ...                     %x = linalg.matmul ...
    %g = coll.wait %f ...                      %g = coll.wait %f ...
    ```
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"h100-nvlink\"",
           "device description for the simulation">,
    Option<"memoryLimitMb", "memory-limit-mb", "double", /*default=*/"0",
           "absolute limit in MiB (0: the original peak plus the headroom)">,
    Option<"memoryHeadroomMb", "memory-headroom-mb", "double",
           /*default=*/"0", "MiB above the original peak">,
    Option<"distance", "distance", "unsigned", /*default=*/"200",
           "furthest an all-gather start moves, in ops">,
  ];
}

def CollReportPass : Pass<"coll-report", "::mlir::ModuleOp"> {
  let summary = "Reports simulated time, overlap and memory of a step";
  let description = [{
    For each function (or the one named by `function`), runs the memory
    timeline and the stream simulator on `device` and prints a table to
    stderr. Optionally it writes:
    * `json`: the figures, including `peak_bytes`, `makespan_us`,
      `compute_us`, `comm_us`, `exposed_comm_us`, `lower_bound_us`,
      `num_collectives` per kind and `num_ops`;
    * `trace`: a Chrome-trace/Perfetto JSON of the simulated compute and
      communication streams;
    * `plot`: an SVG of live memory over simulated time.

    The IR is not changed.

    ```sh
    loom-opt step.mlir --coll-report="device=h100-ib json=r.json trace=t.json plot=m.svg" -o /dev/null
    ```
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"h100-nvlink\"",
           "device description (a name in devices/ or a .json path)">,
    Option<"profile", "profile", "std::string", /*default=*/"\"\"",
           "measured op times overriding estimates ({\"ops\": {id: us}})">,
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
  let summary = "Reorders collectives by a simple policy, for comparison";
  let description = [{
    The baselines the overlap scheduler is measured against:

    * `original`: no change.
    * `sink-waits`: every `coll.wait` moves down to just before the first
      use of its result.
    * `eager-prefetch`: every all-gather start moves up as far as its
      operands allow, in original order, and waits sink. This is the
      aggressive policy that raised peak memory by 60% in Inductor's overlap
      scheduler: every gathered parameter is live from the top of the step.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"original\"",
           "original, sink-waits or eager-prefetch">,
  ];
}

def ConvertCollToLoomrtPass : Pass<"convert-coll-to-loomrt", "::mlir::ModuleOp"> {
  let summary = "Lowers coll ops to loomrt runtime calls, at the tensor level";
  let description = [{
    Every start becomes a call to `loomrt_coll_start` on the input's buffer
    and a freshly allocated output buffer; its wait becomes
    `loomrt_coll_wait` and a `bufferization.to_tensor` of the output.
    Both calls take buffer addresses as i64, so the ABI does not depend on
    the memref calling convention. The wait takes the input's buffer again.
    That keeps the input tensor live (and unwritten by in-place
    bufferisation) until the collective is done, since it is read
    asynchronously. `coll.release` is dropped (bufferisation's deallocation
    frees buffers after their last use). `coll.comm_rank` becomes
    `loomrt_rank`, and `coll.comm_world` goes away.

    ```mlir
    // before
    %f = coll.all_gather_start %s on %c gather_axis = 0 : ...
    %w = coll.wait %f : !coll.future<tensor<16xf32>>
    // after
    %in = bufferization.to_buffer %s read_only : tensor<4xf32> to memref<4xf32>
    %out = memref.alloc() : memref<16xf32>
    %h = call @loomrt_coll_start(%c0, %c0, %c0, %c0, %pin, %c4, %pout, %c16)
    ...
    call @loomrt_coll_wait(%h, %pin2, %pout2) : (i64, i64, i64) -> ()
    %w = bufferization.to_tensor %out restrict writable : ...
    ```

    Only flat-layout collectives lower: gather and scatter axis 0 (the
    rank-major layout `zero-partition` and `coll-bucket` emit), element
    types f32 and f64, and a world communicator. Anything else is a
    diagnostic.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // LOOM_DIALECT_COLL_COLLPASSES_TD
