// RUN: loom-opt %s --split-input-file --pp-link-stages --verify-diagnostics | FileCheck %s

// The stages' definitions get the stage's suffix (internal linkage but for
// the entry point and the manifest), their uses follow, one declaration is
// shared, and the tables list each stage's entry point and manifest.
// CHECK-LABEL: module {
// CHECK-NOT: module @stage
// CHECK-DAG: llvm.func @loomrt_coll_wait(i64)
// CHECK-DAG: llvm.func internal @loom_step_stage0()
// CHECK-DAG: llvm.func @loom_step_packed_stage0(%{{.*}}: !llvm.ptr) {
// CHECK-DAG: llvm.call @loom_step_stage0() : () -> ()
// CHECK-DAG: llvm.mlir.global external constant @loom_step_manifest_stage0(
// CHECK-DAG: llvm.mlir.global private constant @name_stage1(
// CHECK-DAG: llvm.func internal @loom_step_stage1()
// CHECK-DAG: llvm.func @loom_step_packed_stage1(
// CHECK-DAG: llvm.call @loom_step_stage1() : () -> ()
// CHECK-DAG: llvm.mlir.global external constant @loom_pipeline_stages(2 : i64)
// CHECK-DAG: llvm.mlir.global external constant @loom_pipeline_packed() {{.*}} : !llvm.array<2 x ptr> {
// CHECK-DAG: llvm.mlir.addressof @loom_step_packed_stage1 : !llvm.ptr
// CHECK-DAG: llvm.mlir.global external constant @loom_pipeline_manifests()
// CHECK-DAG: llvm.mlir.addressof @loom_step_manifest_stage0 : !llvm.ptr
module {
  module @stage0 attributes {train.pipeline_stage = 0 : i64} {
    llvm.func @loomrt_coll_wait(i64)
    llvm.func @loom_step() {
      llvm.return
    }
    llvm.func @loom_step_packed(%arg0: !llvm.ptr) {
      llvm.call @loom_step() : () -> ()
      llvm.return
    }
    llvm.mlir.global external constant @loom_step_manifest(0 : i64) : i64
  }
  module @stage1 attributes {train.pipeline_stage = 1 : i64} {
    llvm.func @loomrt_coll_wait(i64)
    llvm.mlir.global private constant @name("s1") : !llvm.array<2 x i8>
    llvm.func @loom_step() {
      llvm.return
    }
    llvm.func @loom_step_packed(%arg0: !llvm.ptr) {
      llvm.call @loom_step() : () -> ()
      llvm.return
    }
    llvm.mlir.global external constant @loom_step_manifest(1 : i64) : i64
  }
}

// -----

module {
  module @stage0 attributes {train.pipeline_stage = 0 : i64} {
    llvm.func @loomrt_coll_wait(i64)
  }
  module @stage1 attributes {train.pipeline_stage = 1 : i64} {
    // expected-error @+1 {{pp-link-stages: stage 1: @loomrt_coll_wait conflicts with the linked module's (declared with another type, or defined twice)}}
    llvm.func @loomrt_coll_wait(i32)
  }
}

// -----

module {
  // expected-error @+1 {{pp-link-stages: stage 1 where stage 0 was expected (stages in order from 0)}}
  module @stage1 attributes {train.pipeline_stage = 1 : i64} {
  }
}

// -----

module {
  module @stage0 attributes {train.pipeline_stage = 0 : i64} {
    // expected-error @+1 {{pp-link-stages: stage 0: 'func.func': expected LLVM functions and globals}}
    func.func @step() {
      return
    }
  }
}
