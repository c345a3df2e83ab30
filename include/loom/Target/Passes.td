//===- Passes.td - the target a step is compiled for -------*- tablegen -*-===//
//
// The one pass that reads device descriptions and profiles from disk.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TARGET_PASSES_TD
#define LOOM_TARGET_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomSetTargetPass : Pass<"loom-set-target", "::mlir::ModuleOp"> {
  let summary = "Attaches the device (and a measured profile) a step is "
                "compiled for";
  let description = [{
    Reads the device description `device` (a name looked up in
    `$LOOM_DEVICE_DIR` and then the source tree's `devices/`, or a path to a
    `.json` file) and, unless `profile` is empty, a trainer's `--profile`
    output, and attaches them to the module as
    `train.target = #train.target<...>` (a target already there is
    replaced). This is the only pass that reads either file: every pass that
    estimates time (`pp-partition`, `train-remat`, `zero-selective-gather`,
    `coll-bucket`, `coll-prefetch`, `coll-overlap-schedule`, `coll-report`)
    builds its cost model from the attribute of the nearest enclosing
    module, and fails without one. So a printed module carries the figures
    it was scheduled with, and re-running a phase on it needs no files.

    ```mlir
    // loom-opt --loom-set-target='device=cpu'
    module {}
    // becomes
    module attributes {train.target = #train.target<device = "cpu",
        peak_flops = {bf16 = 5.000000e+10 : f64, ...},
        memory_bandwidth = 2.000000e+10, memory_bytes = 2.400000e+10,
        compute_efficiency = 5.000000e-01, memory_efficiency = 0.69999999999999996,
        compute_slowdown = 0.000000e+00,
        links = [#train.link<scope = "node", bandwidth = 5.000000e+09,
                             latency = 2.000000e-06>]>} {}
    ```

    The profile's op ids are bound to the ops carrying them
    (`trainer-stamp-op-ids`) by each pass that reads it, so the target can
    be set before the ids are stamped. A missing or malformed file is an
    error naming the file and the field.
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"\"",
           "The device description: a name in devices/ or a .json path "
           "(required)">,
    Option<"profile", "profile", "std::string", /*default=*/"\"\"",
           "A trainer's --profile output whose measured times replace the "
           "device model's estimates">,
  ];
  let dependentDialects = ["::loom::train::TrainDialect"];
}

#endif // LOOM_TARGET_PASSES_TD
