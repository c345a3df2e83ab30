// Tests loom-set-target: the device description (and a profile) attached to
// the module as a #train.target that reads back to the same attribute, a
// target already there replaced, and the files' errors. Passes that estimate
// time read the attribute, and fail without one.
// RUN: loom-opt %s --loom-set-target=device=h100-nvlink | FileCheck %s
// RUN: loom-opt %s --loom-set-target=device=h100-nvlink | loom-opt | FileCheck %s
// RUN: loom-opt %s --loom-set-target=device=cpu --loom-set-target=device=%S/../../devices/h100-ib.json | FileCheck %s --check-prefix=REPLACED
// RUN: loom-opt %s -trainer-stamp-op-ids --loom-set-target="device=cpu profile=%S/../Dialect/Coll/Inputs/report-profile.json" | FileCheck %s --check-prefix=PROFILE
// RUN: loom-opt %s -trainer-stamp-op-ids --loom-set-target="device=cpu profile=%S/../Dialect/Coll/Inputs/report-profile.json" -mlir-print-debuginfo | loom-opt --coll-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: not loom-opt %s --loom-set-target 2>&1 | FileCheck %s --check-prefix=NODEVICE
// RUN: not loom-opt %s --loom-set-target=device=nowhere 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not loom-opt %s --loom-set-target="device=cpu profile=%t.missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: echo '{"name": "bad", "peak_flops": {"f32": 1e12}, "memory_bandwidth": -1}' > %t.bad.json
// RUN: not loom-opt %s --loom-set-target=device=%t.bad.json 2>&1 | FileCheck %s --check-prefix=MALFORMED
// RUN: not loom-opt %s --coll-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTARGET

// CHECK: module attributes {train.target = #train.target<device = "h100-nvlink",
// CHECK-SAME: peak_flops = {bf16 = 9.890000e+14 : f64, f16 = 9.890000e+14 : f64, f32 = 6.700000e+13 : f64, f64 = 6.700000e+13 : f64},
// CHECK-SAME: memory_bandwidth = 3.350000e+12, memory_bytes = 8.000000e+10,
// CHECK-SAME: compute_efficiency = 0.69999999999999996, memory_efficiency = 8.000000e-01,
// CHECK-SAME: compute_slowdown = 0.000000e+00,
// CHECK-SAME: links = [#train.link<scope = "node", max_ranks = 8, bandwidth = 3.600000e+11, latency = 6.000000e-06>,
// CHECK-SAME: #train.link<scope = "cluster", bandwidth = 4.500000e+10, latency = 1.200000e-05>]>}

// REPLACED: train.target = #train.target<device = "h100-ib",
// REPLACED-NOT: device = "cpu"

// PROFILE: profile = <source = "{{.*}}report-profile.json", target = "cpu", world_size = 4, steps = 3,
// PROFILE-SAME: step_seconds = 1.300000e-04, wait_seconds = 0.000000e+00,
// PROFILE-SAME: ops = [0, 2, 3, 4, 6], op_seconds = [0.000000e+00, 0.000000e+00, 6.000000e-05, 6.000000e-05, 0.000000e+00],
// PROFILE-SAME: fused = [], fused_into = [], collectives = [1], collective_seconds = [1.000000e-04]>>}

// REPORT: coll-report: @f on cpu with the profile {{.*}}report-profile.json

// NODEVICE: error: loom-set-target: expected device=<name in devices/ or a .json path>
// UNKNOWN: error: loom-set-target: nowhere: no device description found
// MISSING: error: loom-set-target: {{.*}}missing.json: cannot open
// MALFORMED: error: loom-set-target: {{.*}}bad.json: expected 'memory_bandwidth' to be positive
// MALFORMED-NOT: error
// NOTARGET: error: coll-report: the module has no target (train.target); run loom-set-target{device=<name>} first

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = math.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
