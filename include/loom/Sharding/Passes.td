//===- Passes.td - ZeRO sharding ---------------------------*- tablegen -*-===//
//
// The training step sharded ZeRO-style over a communicator.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SHARDING_PASSES_TD
#define LOOM_SHARDING_PASSES_TD

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
      the region's last use (through views: after the last reader of a slice
      or reshape of it, which shares its buffer). Gradients are
      reduce-scattered into shards as
      soon as they exist, and the optimizer updates shards.
    * stage 1: parameters stay whole and optimizer state is sharded. Each
      rank updates its own slice of a parameter (`coll.comm_rank`), and the
      updated slices are all-gathered into the new parameter. The full
      gradient is released at the end of the step.
    * stage 2: as stage 1, but the full gradient is released as soon as its
      reduce-scatter has started.

    The returned loss is all-reduced (`avg`) so every rank reports the
    global-batch mean.

    A pipeline's stages (`pp-partition{replicas=D}`, functions tagged
    `train.pipeline_stage`) are sharded at stage 1 or 2 over their replicas:
    `world-size` must be `D`, the collectives run on
    `coll.comm_group %world size = D stride = 1` (ranks `s D ... s D + D - 1`
    of the `P D`-rank world), the stage's transfers stay as they are, and
    only the last stage has a loss to average. With `world-size=1` every collective folds away under
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
    time per byte (the cost model's estimate on the module's target; small
    parameters are latency-bound and win) and keeps them while the kept
    bytes fit in `budget-mb`. Ties go to the earlier parameter, so every rank makes the
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
  ];
  let dependentDialects = ["::loom::coll::CollDialect"];
}

#endif // LOOM_SHARDING_PASSES_TD
