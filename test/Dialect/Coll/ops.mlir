// Tests that every coll type and op prints and parses back unchanged, in the
// custom and the generic form.
// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// CHECK-LABEL: func.func @comm_world
func.func @comm_world() -> (!coll.comm<8>, !coll.comm<?>) {
  // CHECK: %{{.+}} = coll.comm_world : !coll.comm<8>
  %0 = coll.comm_world : !coll.comm<8>
  // CHECK: %{{.+}} = coll.comm_world : !coll.comm<?>
  %1 = coll.comm_world : !coll.comm<?>
  return %0, %1 : !coll.comm<8>, !coll.comm<?>
}

// CHECK-LABEL: func.func @comm_group
func.func @comm_group(%world: !coll.comm<8>) -> (!coll.comm<2>, !coll.comm<4>) {
  // CHECK: coll.comm_group %{{.+}} size = 2 stride = 1 : !coll.comm<8> -> !coll.comm<2>
  %replicas = coll.comm_group %world size = 2 stride = 1 : !coll.comm<8> -> !coll.comm<2>
  // CHECK: coll.comm_group %{{.+}} size = 4 stride = 2 : !coll.comm<8> -> !coll.comm<4>
  %stages = coll.comm_group %world size = 4 stride = 2 : !coll.comm<8> -> !coll.comm<4>
  return %replicas, %stages : !coll.comm<2>, !coll.comm<4>
}

// CHECK-LABEL: func.func @comm_rank
func.func @comm_rank(%comm: !coll.comm<8>) -> index {
  // CHECK: coll.comm_rank %{{.+}} : !coll.comm<8>
  %r = coll.comm_rank %comm : !coll.comm<8>
  return %r : index
}

// A full gradient released once its reduce-scatter has started (ZeRO-2).
// CHECK-LABEL: func.func @release_of_a_start_input
func.func @release_of_a_start_input(%comm: !coll.comm<2>, %g: tensor<8xf32>) -> tensor<4xf32> {
  %e = math.exp %g : tensor<8xf32>
  %f = coll.reduce_scatter_start %e on %comm scatter_axis = 0 reduction = <avg> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<4xf32>>
  // CHECK: coll.release %{{.+}} : tensor<8xf32>
  coll.release %e : tensor<8xf32>
  %w = coll.wait %f : !coll.future<tensor<4xf32>>
  return %w : tensor<4xf32>
}

// CHECK-LABEL: func.func @all_gather
// CHECK-SAME: (%[[COMM:.+]]: !coll.comm<4>, %[[SHARD:.+]]: tensor<128x64xbf16>)
func.func @all_gather(%comm: !coll.comm<4>, %shard: tensor<128x64xbf16>) -> tensor<128x256xbf16> {
  // CHECK: %[[F:.+]] = coll.all_gather_start %[[SHARD]] on %[[COMM]] gather_axis = 1 : (tensor<128x64xbf16>, !coll.comm<4>) -> !coll.future<tensor<128x256xbf16>>
  %f = coll.all_gather_start %shard on %comm gather_axis = 1
      : (tensor<128x64xbf16>, !coll.comm<4>) -> !coll.future<tensor<128x256xbf16>>
  // CHECK: %[[W:.+]] = coll.wait %[[F]] : !coll.future<tensor<128x256xbf16>>
  %w = coll.wait %f : !coll.future<tensor<128x256xbf16>>
  // CHECK: return %[[W]]
  return %w : tensor<128x256xbf16>
}

// CHECK-LABEL: func.func @reduce_scatter
func.func @reduce_scatter(%comm: !coll.comm<8>, %grad: tensor<4096x16xf32>) -> tensor<512x16xf32> {
  // CHECK: coll.reduce_scatter_start %{{.+}} on %{{.+}} scatter_axis = 0 reduction = <avg> : (tensor<4096x16xf32>, !coll.comm<8>) -> !coll.future<tensor<512x16xf32>>
  %f = coll.reduce_scatter_start %grad on %comm scatter_axis = 0 reduction = <avg>
      : (tensor<4096x16xf32>, !coll.comm<8>) -> !coll.future<tensor<512x16xf32>>
  %w = coll.wait %f : !coll.future<tensor<512x16xf32>>
  return %w : tensor<512x16xf32>
}

// CHECK-LABEL: func.func @all_reduce_kinds
func.func @all_reduce_kinds(%comm: !coll.comm<2>, %x: tensor<16xf32>, %i: tensor<16xi32>)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16xi32>, tensor<16xi32>) {
  // CHECK: coll.all_reduce_start %{{.+}} reduction = <sum>
  %f0 = coll.all_reduce_start %x on %comm reduction = <sum> : (tensor<16xf32>, !coll.comm<2>) -> !coll.future<tensor<16xf32>>
  // CHECK: coll.all_reduce_start %{{.+}} reduction = <avg>
  %f1 = coll.all_reduce_start %x on %comm reduction = <avg> : (tensor<16xf32>, !coll.comm<2>) -> !coll.future<tensor<16xf32>>
  // CHECK: coll.all_reduce_start %{{.+}} reduction = <max>
  %f2 = coll.all_reduce_start %i on %comm reduction = <max> : (tensor<16xi32>, !coll.comm<2>) -> !coll.future<tensor<16xi32>>
  // CHECK: coll.all_reduce_start %{{.+}} reduction = <min>
  %f3 = coll.all_reduce_start %i on %comm reduction = <min> : (tensor<16xi32>, !coll.comm<2>) -> !coll.future<tensor<16xi32>>
  %0 = coll.wait %f0 : !coll.future<tensor<16xf32>>
  %1 = coll.wait %f1 : !coll.future<tensor<16xf32>>
  %2 = coll.wait %f2 : !coll.future<tensor<16xi32>>
  %3 = coll.wait %f3 : !coll.future<tensor<16xi32>>
  return %0, %1, %2, %3 : tensor<16xf32>, tensor<16xf32>, tensor<16xi32>, tensor<16xi32>
}

// CHECK-LABEL: func.func @broadcast_scalar
func.func @broadcast_scalar(%comm: !coll.comm<4>, %x: tensor<f32>) -> tensor<f32> {
  // CHECK: coll.broadcast_start %{{.+}} on %{{.+}} root = 3 : (tensor<f32>, !coll.comm<4>) -> !coll.future<tensor<f32>>
  %f = coll.broadcast_start %x on %comm root = 3 : (tensor<f32>, !coll.comm<4>) -> !coll.future<tensor<f32>>
  %w = coll.wait %f : !coll.future<tensor<f32>>
  return %w : tensor<f32>
}

// Dynamic communicators and dynamic dimensions are checked where they can be.
// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%comm: !coll.comm<?>, %x: tensor<?x8xf32>, %y: tensor<64xf32>)
    -> (tensor<?x8xf32>, tensor<16xf32>) {
  // CHECK: coll.all_gather_start %{{.+}} : (tensor<?x8xf32>, !coll.comm<?>) -> !coll.future<tensor<?x8xf32>>
  %f0 = coll.all_gather_start %x on %comm gather_axis = 0 : (tensor<?x8xf32>, !coll.comm<?>) -> !coll.future<tensor<?x8xf32>>
  // CHECK: coll.reduce_scatter_start %{{.+}} : (tensor<64xf32>, !coll.comm<?>) -> !coll.future<tensor<16xf32>>
  %f1 = coll.reduce_scatter_start %y on %comm scatter_axis = 0 reduction = <sum> : (tensor<64xf32>, !coll.comm<?>) -> !coll.future<tensor<16xf32>>
  %0 = coll.wait %f0 : !coll.future<tensor<?x8xf32>>
  %1 = coll.wait %f1 : !coll.future<tensor<16xf32>>
  return %0, %1 : tensor<?x8xf32>, tensor<16xf32>
}

// A gathered parameter released after its last use; compute between start and
// wait overlaps the gather.
// CHECK-LABEL: func.func @gather_use_release
func.func @gather_use_release(%comm: !coll.comm<2>, %shard: tensor<32x16xf32>, %x: tensor<4x16xf32>,
                              %acc: tensor<4x64xf32>) -> tensor<4x64xf32> {
  // CHECK: %[[F:.+]] = coll.all_gather_start
  %f = coll.all_gather_start %shard on %comm gather_axis = 0 : (tensor<32x16xf32>, !coll.comm<2>) -> !coll.future<tensor<64x16xf32>>
  // CHECK: %[[X:.+]] = math.exp
  %xe = math.exp %x : tensor<4x16xf32>
  // CHECK: %[[W:.+]] = coll.wait %[[F]]
  %w = coll.wait %f : !coll.future<tensor<64x16xf32>>
  // CHECK: %[[Y:.+]] = linalg.matmul
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                      affine_map<(m, n, k) -> (n, k)>,
                                      affine_map<(m, n, k) -> (m, n)>]
       ins(%xe, %w : tensor<4x16xf32>, tensor<64x16xf32>) outs(%acc : tensor<4x64xf32>) -> tensor<4x64xf32>
  // CHECK: coll.release %[[W]] : tensor<64x16xf32>
  coll.release %w : tensor<64x16xf32>
  return %y : tensor<4x64xf32>
}

// A start and its wait may sit in any block, as long as it is the same one.
// CHECK-LABEL: func.func @inside_region
func.func @inside_region(%comm: !coll.comm<2>, %x: tensor<8xf32>, %cond: i1) -> tensor<8xf32> {
  // CHECK: scf.if
  %r = scf.if %cond -> tensor<8xf32> {
    // CHECK: coll.all_reduce_start
    %f = coll.all_reduce_start %x on %comm reduction = <sum> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
    // CHECK: coll.wait
    %w = coll.wait %f : !coll.future<tensor<8xf32>>
    scf.yield %w : tensor<8xf32>
  } else {
    scf.yield %x : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// CHECK-LABEL: func.func @point_to_point
func.func @point_to_point(%comm: !coll.comm<4>, %x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: coll.send_start %{{.+}} on %{{.+}} to = 1 tag = 3 : (tensor<8x16xf32>, !coll.comm<4>) -> !coll.future<tensor<0xf32>>
  %s = coll.send_start %x on %comm to = 1 tag = 3 : (tensor<8x16xf32>, !coll.comm<4>) -> !coll.future<tensor<0xf32>>
  // CHECK: coll.recv_start on %{{.+}} from = 3 tag = 0 : (!coll.comm<4>) -> !coll.future<tensor<8x16xf32>>
  %r = coll.recv_start on %comm from = 3 tag = 0 : (!coll.comm<4>) -> !coll.future<tensor<8x16xf32>>
  %y = coll.wait %r : !coll.future<tensor<8x16xf32>>
  %done = coll.wait %s : !coll.future<tensor<0xf32>>
  return %y : tensor<8x16xf32>
}
