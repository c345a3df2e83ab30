// RUN: loom-opt %s --pass-pipeline='builtin.module(codegen-eliminate-empty-tensors)' --split-input-file | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// A generic's result inserted into a slice of another tensor: upstream's
// elimination runs and the generic writes into that slice.
// CHECK-LABEL: func.func @into_a_slice
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>, %[[T:[^:]*]]: tensor<8x8xf32>)
// CHECK: %[[S:.+]] = tensor.extract_slice %[[T]][4, 0] [4, 8] [1, 1]
// CHECK: %[[H:.+]] = linalg.generic {{.*}} outs(%[[S]] : tensor<4x8xf32>)
// CHECK: tensor.insert_slice %[[H]] into %[[T]][4, 0] [4, 8] [1, 1]
func.func @into_a_slice(%x: tensor<4x8xf32>, %t: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %r = tensor.insert_slice %h into %t[4, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// The generic already writes into the slice (as RoPE's decomposition and
// its inverse do): no source starts at a tensor.empty, so the module is not
// analysed (bench/pipeline --compile-times shows the time saved), and the IR
// is unchanged.
// CHECK-LABEL: func.func @already_in_place
// CHECK: %[[S:.+]] = tensor.extract_slice
// CHECK: linalg.generic {{.*}} outs(%[[S]] : tensor<4x8xf32>)
func.func @already_in_place(%x: tensor<4x8xf32>, %t: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = tensor.extract_slice %t[4, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%s : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %r = tensor.insert_slice %h into %t[4, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A step's result written into its caller's buffer (what the trainer's
// entry point builds): the update's init becomes the destination.
// CHECK-LABEL: func.func @into_the_callers_buffer
// CHECK-SAME: (%{{.+}}: tensor<4x8xf32>, %[[OUT:.+]]: memref<4x8xf32>)
// CHECK: %[[D:.+]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: %[[H:.+]] = linalg.generic {{.*}} outs(%[[D]] : tensor<4x8xf32>)
// CHECK: bufferization.materialize_in_destination %[[H]] in writable %[[OUT]]
func.func @into_the_callers_buffer(%x: tensor<4x8xf32>, %out: memref<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  bufferization.materialize_in_destination %h in restrict writable %out : (tensor<4x8xf32>, memref<4x8xf32>) -> ()
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// A parameter's update written into its own buffer (train.tied_results):
// every read of the parameter is at or before the update, and the new value
// is only read besides, so the update writes into the buffer without
// upstream's analysis (the same IR upstream gives, its tensor.empty gone).
// CHECK-LABEL: func.func @update_after_reads
// CHECK-SAME: (%[[W:.+]]: memref<8xf32>, %[[OUT:.+]]: memref<8xf32>)
// CHECK: bufferization.to_tensor %[[W]] restrict :
// CHECK-NEXT: tensor.empty
// CHECK-NOT: tensor.empty
// CHECK: %[[D:.+]] = bufferization.to_tensor %[[W]] restrict writable
// CHECK: %[[U:.+]] = linalg.generic {{.*}} outs(%[[D]] : tensor<8xf32>)
// CHECK: bufferization.materialize_in_destination %[[U]] in writable %[[W]]
func.func @update_after_reads(%wbuf: memref<8xf32>, %out: memref<8xf32>) {
  %w = bufferization.to_tensor %wbuf restrict : memref<8xf32> to tensor<8xf32>
  %e0 = tensor.empty() : tensor<8xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %u = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %g : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%u : tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  bufferization.materialize_in_destination %u in restrict writable %wbuf : (tensor<8xf32>, memref<8xf32>) -> ()
  bufferization.materialize_in_destination %r in restrict writable %out : (tensor<8xf32>, memref<8xf32>) -> ()
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// The old value is read after the update: not written into the buffer on
// its face. Upstream's pass runs, and leaves the tensor.empty it replaced in
// the IR (the direct path erases it). Upstream replaces it too: it trusts
// `restrict` on both accesses to the buffer, and the trainer's entry point
// relies on codegen-update-in-place having put the update after every read.
// CHECK-LABEL: func.func @read_after_update
// CHECK: tensor.empty
func.func @read_after_update(%wbuf: memref<8xf32>, %out: memref<8xf32>) {
  %w = bufferization.to_tensor %wbuf restrict : memref<8xf32> to tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.negf %a : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.mulf %a, %a : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  bufferization.materialize_in_destination %u in restrict writable %wbuf : (tensor<8xf32>, memref<8xf32>) -> ()
  bufferization.materialize_in_destination %r in restrict writable %out : (tensor<8xf32>, memref<8xf32>) -> ()
  return
}
