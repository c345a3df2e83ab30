// One ZeRO-3 training step (forward + backward, no optimizer) of a two-layer
// MLP on 4 ranks, written the way Loom's passes will produce it.
//
//   h    = relu(x W1^T)          x: 8x64, W1: 256x64 (each rank holds 64x64)
//   y    = h W2^T                W2: 64x256 (each rank holds 16x256)
//   loss = sum((y - t)^2) / 512
//
// Each parameter shard is all-gathered before its use, with independent compute
// placed between the start and the wait so the gather hides under it, and the
// gathered weight is released after its last use (DeepCompile's
// gather/release). W2 is gathered again for the backward. Gradients are
// reduce-scattered (avg) into this rank's shard as soon as they exist.
//
// Try: loom-opt examples/zero3_mlp_step.mlir
//      loom-opt examples/zero3_mlp_step.mlir --print-op-stats -o /dev/null

#x_w = affine_map<(m, n, k) -> (m, k)>
#w_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>
#lhs_t = affine_map<(m, n, k) -> (k, m)>
#rhs = affine_map<(m, n, k) -> (k, n)>
#id = affine_map<(i, j) -> (i, j)>

func.func @mlp_step(%w1_shard: tensor<64x64xf32> {train.param = "mlp.w1"},
                    %w2_shard: tensor<16x256xf32> {train.param = "mlp.w2"},
                    %x: tensor<8x64xf32> {train.input = "x"},
                    %t: tensor<8x64xf32> {train.input = "target"})
    -> (tensor<f32> {train.loss}, tensor<64x64xf32>, tensor<16x256xf32>) {
  %comm = coll.comm_world : !coll.comm<4>
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.00390625 : f32  // 2 / 512

  // Forward. Both gathers start up front; W2's hides under the first matmul.
  %fw1 = coll.all_gather_start %w1_shard on %comm gather_axis = 0
      : (tensor<64x64xf32>, !coll.comm<4>) -> !coll.future<tensor<256x64xf32>>
  %fw2 = coll.all_gather_start %w2_shard on %comm gather_axis = 0
      : (tensor<16x256xf32>, !coll.comm<4>) -> !coll.future<tensor<64x256xf32>>
  %e_h = tensor.empty() : tensor<8x256xf32>
  %z_h = linalg.fill ins(%zero : f32) outs(%e_h : tensor<8x256xf32>) -> tensor<8x256xf32>
  %e_y = tensor.empty() : tensor<8x64xf32>
  %z_y = linalg.fill ins(%zero : f32) outs(%e_y : tensor<8x64xf32>) -> tensor<8x64xf32>
  %w1 = coll.wait %fw1 : !coll.future<tensor<256x64xf32>>
  %pre = linalg.matmul indexing_maps = [#x_w, #w_t, #out]
      ins(%x, %w1 : tensor<8x64xf32>, tensor<256x64xf32>)
      outs(%z_h : tensor<8x256xf32>) -> tensor<8x256xf32>
  coll.release %w1 : tensor<256x64xf32>
  %h = linalg.max ins(%pre, %z_h : tensor<8x256xf32>, tensor<8x256xf32>)
      outs(%e_h : tensor<8x256xf32>) -> tensor<8x256xf32>
  %w2 = coll.wait %fw2 : !coll.future<tensor<64x256xf32>>
  %y = linalg.matmul indexing_maps = [#x_w, #w_t, #out]
      ins(%h, %w2 : tensor<8x256xf32>, tensor<64x256xf32>)
      outs(%z_y : tensor<8x64xf32>) -> tensor<8x64xf32>
  coll.release %w2 : tensor<64x256xf32>
  %diff = linalg.sub ins(%y, %t : tensor<8x64xf32>, tensor<8x64xf32>)
      outs(%e_y : tensor<8x64xf32>) -> tensor<8x64xf32>
  %sq = linalg.mul ins(%diff, %diff : tensor<8x64xf32>, tensor<8x64xf32>)
      outs(%e_y : tensor<8x64xf32>) -> tensor<8x64xf32>
  %e_l = tensor.empty() : tensor<f32>
  %z_l = linalg.fill ins(%zero : f32) outs(%e_l : tensor<f32>) -> tensor<f32>
  %sum = linalg.reduce ins(%sq : tensor<8x64xf32>) outs(%z_l : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %half = arith.constant 0.5 : f32
  %loss = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>],
                          iterator_types = []}
      ins(%sum : tensor<f32>) outs(%e_l : tensor<f32>) {
    ^bb0(%s: f32, %o: f32):
      %m = arith.mulf %s, %scale : f32
      %l = arith.mulf %m, %half : f32
      linalg.yield %l : f32
  } -> tensor<f32>

  // Backward. W2 is gathered again while dy and dW2 are computed.
  %gw2 = coll.all_gather_start %w2_shard on %comm gather_axis = 0
      : (tensor<16x256xf32>, !coll.comm<4>) -> !coll.future<tensor<64x256xf32>>
  %dy = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%diff : tensor<8x64xf32>) outs(%e_y : tensor<8x64xf32>) {
    ^bb0(%d: f32, %o: f32):
      %g = arith.mulf %d, %scale : f32
      linalg.yield %g : f32
  } -> tensor<8x64xf32>
  %e_w2 = tensor.empty() : tensor<64x256xf32>
  %z_w2 = linalg.fill ins(%zero : f32) outs(%e_w2 : tensor<64x256xf32>) -> tensor<64x256xf32>
  %dw2 = linalg.matmul indexing_maps = [#lhs_t, #rhs, #out]
      ins(%dy, %h : tensor<8x64xf32>, tensor<8x256xf32>)
      outs(%z_w2 : tensor<64x256xf32>) -> tensor<64x256xf32>
  %rs2 = coll.reduce_scatter_start %dw2 on %comm scatter_axis = 0 reduction = <avg>
      : (tensor<64x256xf32>, !coll.comm<4>) -> !coll.future<tensor<16x256xf32>>
  %w2b = coll.wait %gw2 : !coll.future<tensor<64x256xf32>>
  %dh = linalg.matmul ins(%dy, %w2b : tensor<8x64xf32>, tensor<64x256xf32>)
      outs(%z_h : tensor<8x256xf32>) -> tensor<8x256xf32>
  coll.release %w2b : tensor<64x256xf32>
  %dpre = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dh, %pre : tensor<8x256xf32>, tensor<8x256xf32>) outs(%e_h : tensor<8x256xf32>) {
    ^bb0(%g: f32, %p: f32, %o: f32):
      %pos = arith.cmpf ogt, %p, %zero : f32
      %r = arith.select %pos, %g, %zero : f32
      linalg.yield %r : f32
  } -> tensor<8x256xf32>
  %e_w1 = tensor.empty() : tensor<256x64xf32>
  %z_w1 = linalg.fill ins(%zero : f32) outs(%e_w1 : tensor<256x64xf32>) -> tensor<256x64xf32>
  %dw1 = linalg.matmul indexing_maps = [#lhs_t, #rhs, #out]
      ins(%dpre, %x : tensor<8x256xf32>, tensor<8x64xf32>)
      outs(%z_w1 : tensor<256x64xf32>) -> tensor<256x64xf32>
  %rs1 = coll.reduce_scatter_start %dw1 on %comm scatter_axis = 0 reduction = <avg>
      : (tensor<256x64xf32>, !coll.comm<4>) -> !coll.future<tensor<64x64xf32>>
  %g2 = coll.wait %rs2 : !coll.future<tensor<16x256xf32>>
  %g1 = coll.wait %rs1 : !coll.future<tensor<64x64xf32>>
  return %loss, %g1, %g2 : tensor<f32>, tensor<64x64xf32>, tensor<16x256xf32>
}
