// Tests coll-report on a module of pipeline stages: the stages run together
// (each receive waits for its sender), and the report gives each stage's
// peak memory, compute, stalls and finish, the makespan and the bubble
// beside the schedule's textbook (P-1)/(M+P-1); json, trace and plot cover
// the pipeline.
// RUN: loom-opt %S/Inputs/mlp.mlir --train-microbatch=microbatches=4 --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=3 schedule=1f1b" --coll-report="json=%t.json trace=%t.trace.json plot=%t.svg" -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// RUN: FileCheck %s --check-prefix=TRACE < %t.trace.json
// RUN: FileCheck %s --check-prefix=PLOT < %t.svg
// RUN: loom-opt %S/Inputs/mlp.mlir --train-microbatch=microbatches=4 --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=3 schedule=1f1b" --coll-report="function=mlp_stage1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: loom-opt %S/Inputs/mlp.mlir --train-microbatch=microbatches=4 --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=3 schedule=1f1b replicas=2" --zero-partition="stage=2 world-size=2" --coll-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=GRID
// RUN: loom-opt %S/Inputs/mlp.mlir --train-microbatch=microbatches=4 --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=3 schedule=1f1b replicas=2" --zero-partition="stage=2 world-size=2" --coll-report="function=mlp_stage0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GRIDONE

// CHECK: coll-report: pipeline of 3 stages, 4 microbatches, 1f1b, on cpu
// CHECK-NEXT: makespan {{[0-9.]+}} us
// CHECK-NEXT: bubble 0.{{[0-9]+}}  ((P-1)/(M+P-1) = 0.3333)
// CHECK-NEXT: stage  peak memory      compute us     stalled us     finish us
// CHECK-NEXT: 0 {{[0-9.]+}} KiB
// CHECK-NEXT: 1 {{[0-9.]+}} KiB
// CHECK-NEXT: 2 {{[0-9.]+}} KiB

// JSON: "stages": 3,
// JSON: "schedule": "1f1b",
// JSON: "textbook_bubble": 0.33333
// JSON: "function": "mlp_stage0",
// JSON: "function": "mlp_stage2",

// TRACE: "name": "stage 0"
// TRACE: "name": "F0",
// TRACE: "name": "stage 2"
// TRACE: "name": "B3",

// PLOT: <svg xmlns="http://www.w3.org/2000/svg" width="1000"
// PLOT: 1f1b, 3 stages, 4 microbatches on cpu
// PLOT: stage 0
// PLOT: fill="#6fa8dc"
// PLOT: fill="#93c47d"

// Stages with ZeRO-2 over their replicas: one replica's stages simulated
// together, each stage's gradient reduce-scatters and parameter all-gathers
// on its replicas' group in its stream.
// GRID: coll-report: pipeline of 3 stages, 4 microbatches, 1f1b, on cpu
// GRID: 2 {{[0-9.]+}} KiB
// GRIDONE: coll-report: @mlp_stage0 on cpu
// GRIDONE-DAG: reduce_scatter
// GRIDONE-DAG: all_gather

// A stage on its own is reported as a function.
// ONE: coll-report: @mlp_stage1 on cpu
// ONE: recv
