// RUN: loom-opt %s --split-input-file --pp-split-stages --verify-diagnostics | FileCheck %s

// Each stage's functions move into a module of their own; a function of no
// stage is copied into every stage.
// CHECK-LABEL: module {
// CHECK-NOT: func.func
// CHECK: module @stage0 attributes {train.pipeline_stage = 0 : i64} {
// CHECK-NEXT: func.func private @helper()
// CHECK-NEXT: func.func @step_stage0()
// CHECK-NOT: func.func
// CHECK: module @stage1 attributes {train.pipeline_stage = 1 : i64} {
// CHECK-NEXT: func.func private @helper()
// CHECK-NEXT: func.func @step_stage1()
// CHECK-NOT: func.func
func.func private @helper()
func.func @step_stage1() attributes {train.pipeline_stage = 1 : i64} {
  return
}
func.func @step_stage0() attributes {train.pipeline_stage = 0 : i64} {
  return
}

// -----

// Without stages, nothing changes.
// CHECK-LABEL: module {
// CHECK-NEXT: func.func @step()
// CHECK-NOT: module @stage
func.func @step() {
  return
}

// -----

func.func @step_stage0() attributes {train.pipeline_stage = 0 : i64} {
  return
}
// expected-error @+1 {{pp-split-stages: stage 2 without stage 1 (stages number from 0 without a gap)}}
func.func @step_stage2() attributes {train.pipeline_stage = 2 : i64} {
  return
}

// -----

func.func @step_stage0() attributes {train.pipeline_stage = 0 : i64} {
  return
}
// expected-error @+1 {{pp-split-stages: 'memref.global' beside the stages' functions: only functions are split}}
memref.global "private" constant @table : memref<2xf32> = dense<0.0>

// -----

module {
  // expected-error @+1 {{pp-split-stages: the module is split already}}
  module @stage0 attributes {train.pipeline_stage = 0 : i64} {
  }
}
