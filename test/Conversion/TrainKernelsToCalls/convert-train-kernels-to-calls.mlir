// RUN: loom-opt %s --convert-train-kernels-to-calls --split-input-file --verify-diagnostics | FileCheck %s

// Contiguous buffers are passed by address (aligned pointer + offset), then
// the scalars; the callee is declared.
// CHECK: func.func private @k(!llvm.ptr, !llvm.ptr, i64, f32)
// CHECK-LABEL: func.func @plain
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %arg0
// CHECK: %[[PA:.*]] = llvm.inttoptr
// CHECK: %[[PB:.*]] = llvm.inttoptr
// CHECK: call @k(%[[PA]], %[[PB]], %arg2, %arg3) : (!llvm.ptr, !llvm.ptr, i64, f32) -> ()
// CHECK-NOT: train.call_kernel
func.func @plain(%a: memref<8xf32>, %b: memref<2x4xf32>, %n: i64, %x: f32) {
  train.call_kernel @k(%n, %x : i64, f32) ins(%a : memref<8xf32>) outs(%b : memref<2x4xf32>)
  return
}

// -----

// A strided input is copied into a contiguous buffer first; a strided
// output is written into one and copied back.
// CHECK-LABEL: func.func @strided
// CHECK: %[[IN:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK: linalg.copy ins(%arg0 : memref<4x4xf32, strided<[8, 1]>>) outs(%[[IN]] : memref<4x4xf32>)
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK: call @k2(
// CHECK-DAG: memref.dealloc %[[IN]]
// CHECK-DAG: linalg.copy ins(%[[OUT]] : memref<4x4xf32>) outs(%arg1 : memref<4x4xf32, strided<[8, 1]>>)
// CHECK: memref.dealloc %[[OUT]]
func.func @strided(%a: memref<4x4xf32, strided<[8, 1]>>, %b: memref<4x4xf32, strided<[8, 1]>>) {
  train.call_kernel @k2() ins(%a : memref<4x4xf32, strided<[8, 1]>>) outs(%b : memref<4x4xf32, strided<[8, 1]>>)
  return
}

// -----

// A declaration of another type is an error, and so are tensors.
func.func private @k3(!llvm.ptr)
func.func @bad(%a: memref<8xf32>, %b: memref<8xf32>) {
  // expected-error @+1 {{calls @k3 as '(!llvm.ptr, !llvm.ptr) -> ()', but it is declared '(!llvm.ptr) -> ()'}}
  train.call_kernel @k3() ins(%a : memref<8xf32>) outs(%b : memref<8xf32>)
  return
}

// -----

func.func @tensors(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{must be bufferised first}}
  %r = train.call_kernel @k4() ins(%a : tensor<8xf32>) outs(%b : tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// A strided output the kernel reads (read_outputs) is copied into its
// contiguous stand-in before the call, and back after.
// CHECK-LABEL: func.func @strided_update
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT: linalg.copy ins(%arg1 : memref<4x4xf32, strided<[8, 1]>>) outs(%[[OUT]] : memref<4x4xf32>)
// CHECK: call @k5(
// CHECK-NEXT: linalg.copy ins(%[[OUT]] : memref<4x4xf32>) outs(%arg1 : memref<4x4xf32, strided<[8, 1]>>)
func.func @strided_update(%a: memref<8xf32>, %b: memref<4x4xf32, strided<[8, 1]>>) {
  train.call_kernel @k5() ins(%a : memref<8xf32>) outs(%b : memref<4x4xf32, strided<[8, 1]>>) {read_outputs = array<i64: 0>}
  return
}
