// Tests convert-coll-to-loomrt: starts become loomrt_coll_start on buffer
// addresses, waits become loomrt_coll_wait (which references the input
// again, keeping it alive until the collective is done) plus a to_tensor of
// the output; releases and comm_world go; comm_rank calls loomrt_rank. The
// last argument of a start is its op id (trainer-stamp-op-ids), -1 without.
// RUN: loom-opt %s -split-input-file -convert-coll-to-loomrt -verify-diagnostics | FileCheck %s

// CHECK-DAG: func.func private @loomrt_coll_start(i64, i64, i64, i64, i64, i64, i64, i64, i64) -> i64
// CHECK-DAG: func.func private @loomrt_coll_wait(i64, i64, i64)
// CHECK-LABEL: func.func @gather_and_scatter
func.func @gather_and_scatter(%s: tensor<4xf32>, %g: tensor<16xf64>) -> tensor<4xf64> {
  // CHECK-NOT: coll.
  // CHECK: %[[IN:.+]] = bufferization.to_buffer %arg0 read_only : tensor<4xf32> to memref<4xf32>
  // CHECK: %[[OUT:.+]] = memref.alloc() : memref<16xf32>
  // CHECK: %[[NOID:.+]] = arith.constant -1 : i64
  // CHECK: %[[H:.+]] = call @loomrt_coll_start(%[[KIND:.+]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[C4:.+]], %{{.+}}, %[[C16:.+]], %[[NOID]])
  // CHECK: %[[IN2:.+]] = bufferization.to_buffer %arg0 read_only
  // CHECK: %[[P:.+]] = memref.extract_aligned_pointer_as_index %[[IN2]]
  // CHECK: call @loomrt_coll_wait(%[[H]],
  // CHECK: %[[W:.+]] = bufferization.to_tensor %[[OUT]] restrict writable
  %c = coll.comm_world : !coll.comm<4>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %w = coll.wait %f : !coll.future<tensor<16xf32>>
  // The reduce-scatter: kind 1, reduction avg (1), dtype f64 (1).
  // CHECK: %[[ONE:.+]] = arith.constant 1 : i64
  // CHECK: %[[ONE2:.+]] = arith.constant 1 : i64
  // CHECK: %[[ONE3:.+]] = arith.constant 1 : i64
  // CHECK: call @loomrt_coll_start(%[[ONE]], %[[ONE2]], %[[ONE3]],
  %r = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<16xf64>, !coll.comm<4>) -> !coll.future<tensor<4xf64>>
  %rw = coll.wait %r : !coll.future<tensor<4xf64>>
  coll.release %w : tensor<16xf32>
  // CHECK-NOT: coll.release
  // CHECK: return
  return %rw : tensor<4xf64>
}

// -----

// bf16: dtype 2 (LOOMRT_BF16); an all-reduce is kind 2, sum 0; op id 12.
// CHECK-LABEL: func.func @bf16
// CHECK: %[[KIND:.+]] = arith.constant 2 : i64
// CHECK: %[[SUM:.+]] = arith.constant 0 : i64
// CHECK: %[[BF16:.+]] = arith.constant 2 : i64
// CHECK: %[[ID:.+]] = arith.constant 12 : i64
// CHECK: call @loomrt_coll_start(%[[KIND]], %[[SUM]], %[[BF16]], {{.*}}, %[[ID]])
func.func @bf16(%s: tensor<8xbf16>) -> tensor<8xbf16> {
  %c = coll.comm_world : !coll.comm<2>
  %f = coll.all_reduce_start %s on %c reduction = <sum> : (tensor<8xbf16>, !coll.comm<2>) -> !coll.future<tensor<8xbf16>> loc("loom.op.12"("bf16.mlir":3:8))
  %w = coll.wait %f : !coll.future<tensor<8xbf16>>
  return %w : tensor<8xbf16>
}

// -----

// CHECK-LABEL: func.func @rank
// CHECK: %[[R:.+]] = call @loomrt_rank() : () -> i64
// CHECK: arith.index_cast %[[R]] : i64 to index
func.func @rank() -> index {
  %c = coll.comm_world : !coll.comm<4>
  %r = coll.comm_rank %c : !coll.comm<4>
  return %r : index
}

// -----

func.func @axis_one(%s: tensor<4x2xf32>) -> tensor<4x8xf32> {
  %c = coll.comm_world : !coll.comm<4>
  // expected-error @below {{cannot lower to loomrt: loomrt collectives use the rank-major layout (axis 0), got axis 1}}
  %f = coll.all_gather_start %s on %c gather_axis = 1 : (tensor<4x2xf32>, !coll.comm<4>) -> !coll.future<tensor<4x8xf32>>
  %w = coll.wait %f : !coll.future<tensor<4x8xf32>>
  return %w : tensor<4x8xf32>
}

// -----

func.func @integers(%s: tensor<4xi32>) -> tensor<16xi32> {
  %c = coll.comm_world : !coll.comm<4>
  // expected-error @below {{cannot lower to loomrt: loomrt collectives take f32, f64 or bf16, got i32}}
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<4xi32>, !coll.comm<4>) -> !coll.future<tensor<16xi32>>
  %w = coll.wait %f : !coll.future<tensor<16xi32>>
  return %w : tensor<16xi32>
}

// -----

// The result buffer is allocated from a static shape.
func.func @dynamic(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c = coll.comm_world : !coll.comm<4>
  // expected-error @+1 {{cannot lower to loomrt: loomrt collectives take static shapes, got tensor<?xf32>}}
  %f = coll.all_reduce_start %x on %c reduction = <sum> : (tensor<?xf32>, !coll.comm<4>) -> !coll.future<tensor<?xf32>>
  %w = coll.wait %f : !coll.future<tensor<?xf32>>
  return %w : tensor<?xf32>
}

// -----

// Point-to-point: a send is kind 4 with the tag in the reduction's place and
// the peer as `arg`; a receive is kind 5 and reads the null address.
// CHECK-LABEL: func.func @point_to_point
func.func @point_to_point(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c = coll.comm_world : !coll.comm<2>
  // CHECK-DAG: %[[SEND:.+]] = arith.constant 4 : i64
  // CHECK-DAG: %[[TAG:.+]] = arith.constant 7 : i64
  // CHECK-DAG: %[[PEER:.+]] = arith.constant 1 : i64
  // CHECK: call @loomrt_coll_start(%[[SEND]], %[[TAG]], %{{.+}}, %[[PEER]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}})
  %s = coll.send_start %x on %c to = 1 tag = 7 : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<0xf32>>
  // CHECK: %[[OUT:.+]] = memref.alloc() : memref<8xf32>
  // CHECK: %[[RECV:.+]] = arith.constant 5 : i64
  // CHECK: %[[H:.+]] = call @loomrt_coll_start(%[[RECV]], %{{.+}}, %{{.+}}, %{{.+}}, %{{c0_i64[_0-9]*}}, %{{c0_i64[_0-9]*}}, %{{.+}}, %{{.+}}, %{{.+}})
  %r = coll.recv_start on %c from = 1 tag = 8 : (!coll.comm<2>) -> !coll.future<tensor<8xf32>>
  // CHECK: call @loomrt_coll_wait(%[[H]], %{{.+}}, %{{.+}})
  %y = coll.wait %r : !coll.future<tensor<8xf32>>
  %done = coll.wait %s : !coll.future<tensor<0xf32>>
  return %y : tensor<8xf32>
}
