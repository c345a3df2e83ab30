// Tests coll-report: the table, the JSON figures, the Chrome trace and the
// memory plot, on a gather of 100 us hidden under 120 us of compute (op times
// pinned by a profile, keyed by the ids trainer-stamp-op-ids gives), and the
// profile's figures against the device model's.
// RUN: rm -rf %t && mkdir -p %t
// RUN: loom-opt %s -trainer-stamp-op-ids --loom-set-target="device=cpu profile=%S/Inputs/report-profile.json" -coll-report="json=%t/r.json trace=%t/t.json plot=%t/m.svg" -o %t/out.mlir 2>&1 | FileCheck %s --check-prefix=TABLE
// RUN: FileCheck %s --check-prefix=JSON --input-file %t/r.json
// RUN: FileCheck %s --check-prefix=TRACE --input-file %t/t.json
// RUN: FileCheck %s --check-prefix=SVG --input-file %t/m.svg
// RUN: FileCheck %s --check-prefix=IR --input-file %t/out.mlir
// RUN: not loom-opt %s -coll-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTARGET
// RUN: not loom-opt %s --loom-set-target=device=h100-nvlink -coll-report="function=g" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FUNCTION
// A profile of other ops, IR without ids, a profile of another world size.
// RUN: not loom-opt %s -trainer-stamp-op-ids --loom-set-target="device=cpu profile=%S/Inputs/report-profile-other.json" -coll-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: not loom-opt %s --loom-set-target="device=cpu profile=%S/Inputs/report-profile.json" -coll-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOIDS
// RUN: not loom-opt %s -trainer-stamp-op-ids --loom-set-target="device=cpu profile=%S/Inputs/report-profile-8-ranks.json" -coll-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: not loom-opt %s -trainer-stamp-op-ids --loom-set-target="device=cpu profile=%t/missing.json" -coll-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING

// TABLE: coll-report: @f on cpu with the profile {{.*}}report-profile.json (7 ops)
// TABLE: makespan 120.0 us
// TABLE: compute 120.0 us
// TABLE: communication 100.0 us
// TABLE: exposed communication 0.0 us
// TABLE: lower bound 120.0 us  (makespan / bound 1.000)
// At the second exp: the shard and its gathered copy (400 + 1600, counted as
// parameters), x and y (800), and the input a (400).
// TABLE: peak memory 3.1 KiB at op 4 (linalg.exp)
// TABLE-NEXT: parameters 2.0 KiB
// TABLE-NEXT: activations 0.8 KiB
// TABLE-NEXT: inputs 0.4 KiB
// TABLE: all_gather 1 0.0 0
// The exps as measured (60 us each) against the roofline's 800 bytes each
// at 20 GB/s * 0.5 (0.08 us), the gather's 100 us against 3 steps of 1.3 us
// and 1200 bytes at 8 GB/s; the step simulated with the device model alone,
// with the profile, and as measured.
// TABLE: predicted against measured ({{.*}}report-profile.json: cpu, 4 ranks, 3 steps)
// TABLE-NEXT: op class ops measured predicted us measured us measured/predicted
// TABLE-NEXT: all_gather 1 1 {{[0-9.]+}} 100.0 {{[0-9.]+}}
// TABLE-NEXT: elementwise 2 2 {{[0-9.]+}} 120.0 {{[0-9.]+}}
// TABLE-NEXT: func 1 1 {{[0-9.]+}} 0.0 0.000
// TABLE-NEXT: step predicted {{[0-9.]+}} us (device model)
// TABLE-NEXT: step simulated 120.0 us (with the profile)
// TABLE-NEXT: profiled step measured 130.0 us (simulated/measured 0.923, predicted/measured {{[0-9.]+}})

// OTHER: error: coll-report: {{.*}}report-profile-other.json: matches none of the 7 op ids here
// NOIDS: error: coll-report: {{.*}}report-profile.json: the IR has no op ids to match the profile against
// RANKS: error: coll-report: {{.*}}report-profile-8-ranks.json: measured on 8 ranks; this step's collectives run on 4
// MISSING: error: loom-set-target: {{.*}}missing.json: cannot open: No such file or directory

// JSON: "function": "f"
// JSON: "target": {
// JSON-NEXT: "device": "cpu",
// JSON-NEXT: "compute_slowdown": 0,
// JSON-NEXT: "profile": "{{.*}}report-profile.json"
// JSON: "num_ops": 7
// JSON: "peak_bytes": 3200
// JSON: "makespan_us": 120
// JSON: "compute_us": 120
// JSON: "comm_us": 100
// JSON: "exposed_comm_us": 0
// JSON: "lower_bound_us": 120
// JSON: "num_collectives": {
// JSON-NEXT: "all_gather": 1,
// JSON: "profile": {
// JSON: "measured_step_us": 130
// JSON: "simulated_step_us": 120
// JSON: "class": "all_gather"
// JSON-NEXT: "ops": 1
// JSON-NEXT: "measured_ops": 1
// JSON: "measured_us": 100

// TRACE: "name":"thread_name"{{.*}}"name":"compute"
// TRACE: "name":"coll.all_gather_start","ph":"X","pid":0,"tid":1,"ts":0,"dur":100

// SVG: <svg
// SVG: peak 3.1 KiB, makespan 0.1 ms
// SVG: <polyline

// The IR is unchanged.
// IR: coll.all_gather_start

// NOTARGET: error: coll-report: the module has no target (train.target); run loom-set-target{device=<name>} first
// FUNCTION: error: coll-report: no function named 'g'

func.func @f(%s: tensor<100xf32> {train.param = "w"}, %c: !coll.comm<4>, %a: tensor<100xf32>) -> tensor<400xf32> {
  %e = tensor.empty() : tensor<100xf32>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
  %e2 = tensor.empty() : tensor<100xf32>
  %x = linalg.exp ins(%a : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
  %y = linalg.exp ins(%x : tensor<100xf32>) outs(%e2 : tensor<100xf32>) -> tensor<100xf32>
  %w = coll.wait %f : !coll.future<tensor<400xf32>>
  return %w : tensor<400xf32>
}
