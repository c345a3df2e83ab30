// Tests the coll folds (a collective over one rank is the identity; one that
// moves zero elements yields an empty tensor) and that canonicalisation and CSE
// never drop, merge or reorder real collectives.
// RUN: loom-opt %s -split-input-file -canonicalize -cse | FileCheck %s

// CHECK-LABEL: func.func @one_rank_is_identity
// CHECK-SAME: (%[[C:.+]]: !coll.comm<1>, %[[X:.+]]: tensor<8x4xf32>)
func.func @one_rank_is_identity(%c: !coll.comm<1>, %x: tensor<8x4xf32>)
    -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  // CHECK-NOT: {{coll\.[a-z_]+ }}
  %f0 = coll.all_gather_start %x on %c gather_axis = 1 : (tensor<8x4xf32>, !coll.comm<1>) -> !coll.future<tensor<8x4xf32>>
  %f1 = coll.reduce_scatter_start %x on %c scatter_axis = 0 reduction = <avg> : (tensor<8x4xf32>, !coll.comm<1>) -> !coll.future<tensor<8x4xf32>>
  %f2 = coll.all_reduce_start %x on %c reduction = <max> : (tensor<8x4xf32>, !coll.comm<1>) -> !coll.future<tensor<8x4xf32>>
  %f3 = coll.broadcast_start %x on %c root = 0 : (tensor<8x4xf32>, !coll.comm<1>) -> !coll.future<tensor<8x4xf32>>
  %0 = coll.wait %f0 : !coll.future<tensor<8x4xf32>>
  %1 = coll.wait %f1 : !coll.future<tensor<8x4xf32>>
  %2 = coll.wait %f2 : !coll.future<tensor<8x4xf32>>
  %3 = coll.wait %f3 : !coll.future<tensor<8x4xf32>>
  // CHECK: return %[[X]], %[[X]], %[[X]], %[[X]]
  return %0, %1, %2, %3 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// The input is a parameter shard the release never owned: the release goes
// with the collective.
// CHECK-LABEL: func.func @one_rank_drops_the_release
// CHECK-SAME: (%[[C:.+]]: !coll.comm<1>, %[[X:.+]]: tensor<8xf32>)
func.func @one_rank_drops_the_release(%c: !coll.comm<1>, %x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK-NOT: {{coll\.[a-z_]+ }}
  // CHECK: %[[Y:.+]] = math.exp %[[X]]
  // CHECK-NOT: {{coll\.[a-z_]+ }}
  // CHECK: return %[[Y]]
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<8xf32>, !coll.comm<1>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  %y = math.exp %w : tensor<8xf32>
  coll.release %w : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// CHECK-LABEL: func.func @one_rank_casts_a_dynamic_input
// CHECK-SAME: (%[[C:.+]]: !coll.comm<1>, %[[X:.+]]: tensor<?xf32>)
func.func @one_rank_casts_a_dynamic_input(%c: !coll.comm<1>, %x: tensor<?xf32>) -> tensor<16xf32> {
  // CHECK: %[[CAST:.+]] = tensor.cast %[[X]] : tensor<?xf32> to tensor<16xf32>
  // CHECK: return %[[CAST]]
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<?xf32>, !coll.comm<1>) -> !coll.future<tensor<16xf32>>
  %w = coll.wait %f : !coll.future<tensor<16xf32>>
  return %w : tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func @zero_elements_move_nothing
func.func @zero_elements_move_nothing(%c: !coll.comm<4>, %x: tensor<0x8xf32>) -> tensor<0x8xf32> {
  // CHECK-NOT: {{coll\.[a-z_]+ }}
  // CHECK: %[[E:.+]] = tensor.empty() : tensor<0x8xf32>
  // CHECK: return %[[E]]
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<0x8xf32>, !coll.comm<4>) -> !coll.future<tensor<0x8xf32>>
  %w = coll.wait %f : !coll.future<tensor<0x8xf32>>
  return %w : tensor<0x8xf32>
}

// -----

// Every rank must still issue a collective whose result is unused, and two
// identical collectives are two collectives.
// CHECK-LABEL: func.func @never_dropped_or_merged
func.func @never_dropped_or_merged(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: %[[C:.+]] = coll.comm_world : !coll.comm<4>
  // CHECK-NOT: coll.comm_world
  %c0 = coll.comm_world : !coll.comm<4>
  %c1 = coll.comm_world : !coll.comm<4>
  // CHECK: %[[F0:.+]] = coll.all_reduce_start %{{.+}} on %[[C]] reduction = <sum>
  // CHECK: %[[F1:.+]] = coll.all_reduce_start %{{.+}} on %[[C]] reduction = <sum>
  // CHECK: %[[F2:.+]] = coll.all_reduce_start %{{.+}} on %[[C]] reduction = <sum>
  %f0 = coll.all_reduce_start %x on %c0 reduction = <sum> : (tensor<8xf32>, !coll.comm<4>) -> !coll.future<tensor<8xf32>>
  %f1 = coll.all_reduce_start %x on %c1 reduction = <sum> : (tensor<8xf32>, !coll.comm<4>) -> !coll.future<tensor<8xf32>>
  %f2 = coll.all_reduce_start %x on %c1 reduction = <sum> : (tensor<8xf32>, !coll.comm<4>) -> !coll.future<tensor<8xf32>>
  // CHECK: coll.wait %[[F0]]
  // CHECK: coll.wait %[[F1]]
  // CHECK: %[[W2:.+]] = coll.wait %[[F2]]
  %w0 = coll.wait %f0 : !coll.future<tensor<8xf32>>
  %w1 = coll.wait %f1 : !coll.future<tensor<8xf32>>
  %w2 = coll.wait %f2 : !coll.future<tensor<8xf32>>
  // CHECK: return %[[W2]]
  return %w2 : tensor<8xf32>
}

// -----

// A release is kept even though it has no result.
// CHECK-LABEL: func.func @release_kept
func.func @release_kept(%c: !coll.comm<2>, %x: tensor<4xf32>) -> tensor<8xf32> {
  // CHECK: %[[W:.+]] = coll.wait
  // CHECK: math.exp %[[W]]
  // CHECK: coll.release %[[W]]
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  %y = math.exp %w : tensor<8xf32>
  coll.release %w : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// The order of collectives on a communicator is kept, whatever their data
// dependences: every rank must issue them in the same order.
// CHECK-LABEL: func.func @order_kept
func.func @order_kept(%c: !coll.comm<2>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  // CHECK: coll.all_gather_start %{{.+}} gather_axis = 0
  // CHECK: coll.broadcast_start
  // CHECK: coll.wait
  // CHECK: coll.wait
  %f0 = coll.all_gather_start %a on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %f1 = coll.broadcast_start %b on %c root = 1 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<4xf32>>
  %w0 = coll.wait %f0 : !coll.future<tensor<8xf32>>
  %w1 = coll.wait %f1 : !coll.future<tensor<4xf32>>
  return %w0, %w1 : tensor<8xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @rank_of_one
func.func @rank_of_one(%c: !coll.comm<1>, %d: !coll.comm<4>) -> (index, index) {
  // CHECK: %[[ZERO:.+]] = arith.constant 0 : index
  // CHECK: %[[R:.+]] = coll.comm_rank %{{.+}} : !coll.comm<4>
  // CHECK: return %[[ZERO]], %[[R]]
  %r0 = coll.comm_rank %c : !coll.comm<1>
  %r1 = coll.comm_rank %d : !coll.comm<4>
  return %r0, %r1 : index, index
}

// -----

// The release of a one-rank reduce-scatter's input goes with it.
// CHECK-LABEL: func.func @one_rank_drops_the_input_release
func.func @one_rank_drops_the_input_release(%c: !coll.comm<1>, %x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK-NOT: {{coll\.[a-z_]+ }}
  // CHECK: %[[E:.+]] = math.exp
  // CHECK: return %[[E]]
  %g = math.exp %x : tensor<8xf32>
  %f = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<8xf32>, !coll.comm<1>) -> !coll.future<tensor<8xf32>>
  coll.release %g : tensor<8xf32>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  return %w : tensor<8xf32>
}

// -----

// A group of the whole parent is the parent; a group of one rank is rank 0
// of it; other groups stay.
// CHECK-LABEL: func.func @whole_group
// CHECK-SAME: (%[[W:.+]]: !coll.comm<4>
func.func @whole_group(%w: !coll.comm<4>, %x: tensor<4xf32>) -> (tensor<4xf32>, index, !coll.comm<2>) {
  // CHECK-DAG: %[[ZERO:.+]] = arith.constant 0 : index
  // CHECK-DAG: %[[G:.+]] = coll.comm_group %[[W]] size = 2 stride = 2
  // CHECK: coll.all_reduce_start %{{.+}} on %[[W]]
  // CHECK: return %{{.+}}, %[[ZERO]], %[[G]]
  %all = coll.comm_group %w size = 4 stride = 1 : !coll.comm<4> -> !coll.comm<4>
  %one = coll.comm_group %w size = 1 stride = 4 : !coll.comm<4> -> !coll.comm<1>
  %two = coll.comm_group %w size = 2 stride = 2 : !coll.comm<4> -> !coll.comm<2>
  %f = coll.all_reduce_start %x on %all reduction = <sum> : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %y = coll.wait %f : !coll.future<tensor<4xf32>>
  %r = coll.comm_rank %one : !coll.comm<1>
  return %y, %r, %two : tensor<4xf32>, index, !coll.comm<2>
}
