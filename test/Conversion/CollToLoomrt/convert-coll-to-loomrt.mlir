// Tests convert-coll-to-loomrt: starts become loomrt_coll_start on buffer
// addresses, waits become loomrt_coll_wait (which references the input
// again, keeping it alive until the collective is done) plus a to_tensor of
// the output; releases and comm_world go; comm_rank calls loomrt_rank. A
// start's fourth argument is its communicator's handle (0: the world; a
// coll.comm_group's from loomrt_comm_group), its last its op id
// (trainer-stamp-op-ids), -1 without.
// RUN: loom-opt %s -split-input-file -convert-coll-to-loomrt -verify-diagnostics | FileCheck %s

// CHECK-DAG: func.func private @loomrt_coll_start(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) -> i64
// CHECK-DAG: func.func private @loomrt_coll_wait(i64, i64, i64)
// CHECK-LABEL: func.func @gather_and_scatter
func.func @gather_and_scatter(%s: tensor<4xf32>, %g: tensor<16xf64>) -> tensor<4xf64> {
  // CHECK-NOT: coll.
  // CHECK: %[[WORLD:.+]] = arith.constant 0 : i64
  // CHECK: %[[IN:.+]] = bufferization.to_buffer %arg0 read_only : tensor<4xf32> to memref<4xf32>
  // CHECK: %[[OUT:.+]] = memref.alloc() : memref<16xf32>
  // CHECK: %[[NOID:.+]] = arith.constant -1 : i64
  // CHECK: %[[H:.+]] = call @loomrt_coll_start(%[[KIND:.+]], %{{.+}}, %{{.+}}, %[[WORLD]], %{{.+}}, %{{.+}}, %[[C4:.+]], %{{.+}}, %[[C16:.+]], %[[NOID]])
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
  // CHECK: call @loomrt_coll_start(%[[SEND]], %[[TAG]], %{{.+}}, %{{.+}}, %[[PEER]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}})
  %s = coll.send_start %x on %c to = 1 tag = 7 : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<0xf32>>
  // CHECK: %[[OUT:.+]] = memref.alloc() : memref<8xf32>
  // CHECK: %[[RECV:.+]] = arith.constant 5 : i64
  // CHECK: %[[H:.+]] = call @loomrt_coll_start(%[[RECV]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{c0_i64[_0-9]*}}, %{{c0_i64[_0-9]*}}, %{{.+}}, %{{.+}}, %{{.+}})
  %r = coll.recv_start on %c from = 1 tag = 8 : (!coll.comm<2>) -> !coll.future<tensor<8xf32>>
  // CHECK: call @loomrt_coll_wait(%[[H]], %{{.+}}, %{{.+}})
  %y = coll.wait %r : !coll.future<tensor<8xf32>>
  %done = coll.wait %s : !coll.future<tensor<0xf32>>
  return %y : tensor<8xf32>
}

// -----

// Groups: a coll.comm_group is loomrt_comm_group(parent's handle, size,
// stride) where it is made, a group of a group takes its parent's handle,
// and the collectives on it pass that handle. A rank in a group is
// computed from the world's: floor(r / stride) mod size at each step.
// CHECK-LABEL: func.func @groups
func.func @groups(%x: tensor<4xf32>) -> (tensor<8xf32>, index) {
  // CHECK: %[[WORLD:.+]] = arith.constant 0 : i64
  // CHECK: %[[REPLICAS:.+]] = call @loomrt_comm_group(%[[WORLD]], %{{.+}}, %{{.+}})
  // CHECK: %[[STAGES:.+]] = call @loomrt_comm_group(%[[WORLD]], %{{.+}}, %{{.+}})
  // CHECK: %[[HALF:.+]] = call @loomrt_comm_group(%[[STAGES]], %{{.+}}, %{{.+}})
  %w = coll.comm_world : !coll.comm<8>
  %replicas = coll.comm_group %w size = 2 stride = 1 : !coll.comm<8> -> !coll.comm<2>
  %stages = coll.comm_group %w size = 4 stride = 2 : !coll.comm<8> -> !coll.comm<4>
  %half = coll.comm_group %stages size = 2 stride = 2 : !coll.comm<4> -> !coll.comm<2>
  // CHECK: call @loomrt_coll_start(%{{.+}}, %{{.+}}, %{{.+}}, %[[REPLICAS]],
  %f = coll.all_gather_start %x on %replicas gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  // CHECK: call @loomrt_coll_start(%{{.+}}, %{{.+}}, %{{.+}}, %[[STAGES]], %[[PEER:.+]],
  %s = coll.send_start %x on %stages to = 3 tag = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<0xf32>>
  // CHECK: call @loomrt_coll_start(%{{.+}}, %{{.+}}, %{{.+}}, %[[HALF]],
  %b = coll.broadcast_start %x on %half root = 1 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<4xf32>>
  %y = coll.wait %f : !coll.future<tensor<8xf32>>
  %sd = coll.wait %s : !coll.future<tensor<0xf32>>
  %bw = coll.wait %b : !coll.future<tensor<4xf32>>
  // CHECK: %[[R:.+]] = call @loomrt_rank()
  // CHECK: %[[S1:.+]] = arith.constant 2 : i64
  // CHECK: %[[D1:.+]] = arith.divui %[[R]], %[[S1]]
  // CHECK: %[[N1:.+]] = arith.constant 4 : i64
  // CHECK: %[[M1:.+]] = arith.remui %[[D1]], %[[N1]]
  // CHECK: %[[S2:.+]] = arith.constant 2 : i64
  // CHECK: %[[D2:.+]] = arith.divui %[[M1]], %[[S2]]
  // CHECK: %[[N2:.+]] = arith.constant 2 : i64
  // CHECK: %[[M2:.+]] = arith.remui %[[D2]], %[[N2]]
  // CHECK: arith.index_cast %[[M2]]
  // CHECK-NOT: coll.comm
  %r = coll.comm_rank %half : !coll.comm<2>
  return %y, %r : tensor<8xf32>, index
}

// -----

// A group of a communicator argument has no runtime handle to split.
func.func @argument_comm(%x: tensor<4xf32>, %c: !coll.comm<4>) -> tensor<8xf32> {
  %g = coll.comm_group %c size = 2 stride = 2 : !coll.comm<4> -> !coll.comm<2>
  // expected-error @below {{cannot lower to loomrt: loomrt collectives run on the world communicator or a coll.comm_group of it}}
  %f = coll.all_gather_start %x on %g gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  return %w : tensor<8xf32>
}
