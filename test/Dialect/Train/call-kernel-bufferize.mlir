// RUN: loom-opt %s --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s

// An output in read_outputs is updated in place: when its init stays live,
// bufferisation gives the kernel a copy of it.
// CHECK-LABEL: func.func @read
// CHECK: %[[NEW:.*]] = memref.alloc()
// CHECK-NEXT: memref.copy %arg1, %[[NEW]]
// CHECK-NEXT: train.call_kernel @k() ins(%arg0 : {{.*}}) outs(%[[NEW]] : memref<16xf32>) {read_outputs = array<i64: 0>}
// CHECK: return %[[NEW]], %arg1
func.func @read(%a: tensor<4xf32>, %x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %g = train.call_kernel @k() ins(%a : tensor<4xf32>) outs(%x : tensor<16xf32>) {read_outputs = array<i64: 0>} -> tensor<16xf32>
  return %g, %x : tensor<16xf32>, tensor<16xf32>
}

// Any other output is only written: a new buffer, no copy.
// CHECK-LABEL: func.func @write
// CHECK: %[[NEW:.*]] = memref.alloc()
// CHECK-NOT: memref.copy
// CHECK: train.call_kernel @k() ins(%arg0 : {{.*}}) outs(%[[NEW]] : memref<16xf32>)
func.func @write(%a: tensor<4xf32>, %x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %g = train.call_kernel @k() ins(%a : tensor<4xf32>) outs(%x : tensor<16xf32>) -> tensor<16xf32>
  return %g, %x : tensor<16xf32>, tensor<16xf32>
}

// An init that dies at the call is updated where it is.
// CHECK-LABEL: func.func @dies
// CHECK-NOT: memref.alloc
// CHECK: train.call_kernel @k() ins(%arg0 : {{.*}}) outs(%arg1 : {{.*}}) {read_outputs = array<i64: 0>}
// CHECK: return %arg1
func.func @dies(%a: tensor<4xf32>, %x: tensor<16xf32>) -> tensor<16xf32> {
  %g = train.call_kernel @k() ins(%a : tensor<4xf32>) outs(%x : tensor<16xf32>) {read_outputs = array<i64: 0>} -> tensor<16xf32>
  return %g : tensor<16xf32>
}
