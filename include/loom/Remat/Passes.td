//===- Passes.td - rematerialisation -----------------------*- tablegen -*-===//
//
// Which forward activations the backward keeps and which it recomputes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_REMAT_PASSES_TD
#define LOOM_REMAT_PASSES_TD

include "mlir/Pass/PassBase.td"

def TrainRematPass : Pass<"train-remat", "::mlir::ModuleOp"> {
  let summary = "Recomputes forward activations in the backward under a "
                "whole-step memory budget";
  let description = [{
    Runs on a training step (a function with a `train.loss` result) after
    `zero-partition` (any stage, any world size) and before the scheduler.
    It decides which forward values the backward keeps, clones the others
    into the backward just before their first use, and leaves the
    collectives in the synchronous order, the least-memory order the
    scheduler starts from: `budget-mb` bounds the peak of that order's
    memory timeline (the one `coll-overlap-schedule` and
    `codegen-memory-plan` use), counted after the rewrite.

    ```mlir
    // layer 3's forward
    %h = linalg.matmul ins(%x, %w1 : ...) outs(%init : ...)
    %a = linalg.generic {silu} ins(%h : ...) ...
    coll.release %w1_fwd
    ...
    // its backward: %h and %a were not kept; the backward's gather of the
    // parameter moves up to the clone, which reads it
    %w1_bwd = coll.wait %g1
    %h.r = linalg.matmul ins(%x, %w1_bwd : ...) outs(%init.r : ...)
    %a.r = linalg.generic {silu} ins(%h.r : ...) ...
    %dw2 = linalg.matmul ins(%a.r, %dy : ...) ...
    ```

    Layers are the `train.param` groups (`layers.3.*`); the prologue and
    epilogue keep everything. Each distinct layer's options (what it keeps,
    what it recomputes, at what cost) come from a 0-1 program solved by CBC
    over a grid of budgets and reduced to the Pareto front; identical layers
    share one solve. `solver` then picks one option per layer:

    * `ilp`: H-Rockmate's step-level program (options, phantoms alive from
      a layer's forward to its backward, peak rows with each layer's
      recomputed bytes as the correction) by CBC, warm-started by `chain`;
    * `chain`: the same problem by exact dynamic programming over integer
      memory units (Rotor's method on a chain);
    * `none`, `every-layer` (what `torch.utils.checkpoint` around each block
      does), `sqrt` (Chen et al.'s sqrt(n) segments), `knapsack`
      (PyTorch's `activation_memory_budget`: never recomputes matmuls and
      attention, keeps what a 0-1 knapsack on bytes against time picks):
      the baselines, rewritten by the same code.

    The solvers' unit may also be a run of layers (`max-segment`: runs of
    2, 4, ... layers, and one of every layer with the prologue and the
    epilogue): inside a run the layers' outputs are ordinary values, so a
    run's options recompute them from its input (segment checkpoints).
    Each grouping is solved on its own and all their solutions compete.

    `activation-budget` bounds the activations the step keeps at the loss
    as a fraction of those it keeps without recomputation (PyTorch's
    `activation_memory_budget`); with `budget-mb` both bounds hold.

    For `ilp` and `chain`, the candidates are the solutions at a fixed
    ladder of modelled budgets; each is rewritten and its real peak counted,
    and the fastest whose peak is within `budget-mb` and whose activations
    are within `activation-budget` wins (the smaller peak on a tie). The
    realised peak is therefore never above the budget, and monotonic in it; a budget below every candidate is an error naming the
    smallest reachable peak, or with `leanest-below-floor` the leanest
    candidate, with a remark. `loom.remat`'s `candidate_peak_bytes` lists
    the peaks of the candidates on the Pareto front of peak and recompute
    time, ascending: the budgets at which the choice changes (loomc searches
    them for the one whose memory plan meets `--remat-budget-mb`). `time-limit-s` bounds all of a step's CBC
    solves together on the wall clock, and `max-nodes` each solve's
    branch-and-bound nodes (the same stop on every machine); a solve
    stopped by either keeps its best solution, or the chain's, with a
    remark that says it was not proven optimal and how far it may be from
    CBC's bound.

    Only pure ops are cloned: never collectives, ops with side effects or
    the loss. The function gets `loom.remat`, a dictionary of what was
    decided and measured (peaks, activations at the loss, recompute time,
    solver statistics).
  }];
  let options = [
    Option<"budgetMb", "budget-mb", "double", /*default=*/"0",
           "Peak of the step's memory timeline in MiB (fractions allowed); "
           "0: no limit (ilp and chain then keep everything)">,
    Option<"activationBudget", "activation-budget", "double",
           /*default=*/"1",
           "ilp and chain: the activations kept at the loss, as a fraction "
           "of the step's without recomputation (PyTorch's "
           "activation_memory_budget); 1: no bound. With budget-mb both "
           "hold">,
    Option<"solver", "solver", "std::string", /*default=*/"\"chain\"",
           "chain (default), ilp, none, every-layer, sqrt or knapsack">,
    Option<"timeLimitSeconds", "time-limit-s", "double", /*default=*/"60",
           "Wall-clock limit of a step's CBC solves together, in seconds "
           "(each solve gets its share of what is left)">,
    Option<"leanestBelowFloor", "leanest-below-floor", "bool",
           /*default=*/"false",
           "A budget below the smallest peak ilp or chain reach takes that "
           "smallest peak (with a remark) instead of failing">,
    Option<"maxSegment", "max-segment", "unsigned", /*default=*/"4",
           "ilp and chain also solve with runs of 2, 4, ... up to this many "
           "consecutive layers as one (segment checkpoints: a run may "
           "recompute the outputs of the layers inside it); 1: layers "
           "alone, whose outputs are always kept">,
    Option<"gap", "gap", "double", /*default=*/"0.01",
           "Relative MIP gap at which CBC stops">,
    Option<"maxNodes", "max-nodes", "int64_t", /*default=*/"-1",
           "Branch-and-bound nodes each CBC solve may explore (-1: no limit); "
           "a solve stopped by it keeps its best solution, as at time-limit-s">,
  ];
  let dependentDialects = ["::loom::coll::CollDialect"];
}

#endif // LOOM_REMAT_PASSES_TD
