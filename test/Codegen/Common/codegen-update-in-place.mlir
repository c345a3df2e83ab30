// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(codegen-update-in-place))' --split-input-file | FileCheck %s

#id = affine_map<(i) -> (i)>

// The state's update reads it at the indices it writes, after every other
// read: both results are tied. The parameter's update is not: a matmul-like
// read of the parameter (through a view) comes after it.
// CHECK-LABEL: func.func @step
// CHECK-SAME: train.tied_results = array<i64: -1, -1, 1>
func.func @step(%w: tensor<8xf32> {train.param = "w"}, %m: tensor<8xf32> {train.state = "w.m"},
                %g: tensor<8xf32>)
    -> (tensor<f32> {train.loss}, tensor<8xf32> {train.param = "w"}, tensor<8xf32> {train.state = "w.m"}) {
  %e = tensor.empty() : tensor<8xf32>
  %m2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%m, %g : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %w2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %m2 : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  // Reads the old %w after its update.
  %v = tensor.expand_shape %w [[0, 1]] output_shape [2, 4] : tensor<8xf32> into tensor<2x4xf32>
  %z = arith.constant 0.0 : f32
  %ee = tensor.empty() : tensor<f32>
  %zz = linalg.fill ins(%z : f32) outs(%ee : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                          iterator_types = ["reduction", "reduction"]}
      ins(%v : tensor<2x4xf32>) outs(%zz : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss, %w2, %m2 : tensor<f32>, tensor<8xf32>, tensor<8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>

// Not tied: an update that reads its argument transposed (it would
// overwrite elements it reads later), one that accumulates into its init,
// and a result that is the argument itself.
// CHECK-LABEL: func.func @untied
// CHECK-NOT: train.tied_results
func.func @untied(%a: tensor<4x4xf32> {train.param = "a"}, %b: tensor<4x4xf32> {train.param = "b"},
                  %c: tensor<4x4xf32> {train.state = "c"})
    -> (tensor<4x4xf32> {train.param = "a"}, tensor<4x4xf32> {train.param = "b"},
        tensor<4x4xf32> {train.state = "c"}) {
  %e = tensor.empty() : tensor<4x4xf32>
  %a2 = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<4x4xf32>
  %b2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<4x4xf32>) outs(%a2 : tensor<4x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %a2, %b2, %c : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

#id = affine_map<(i) -> (i)>

// A collective reads the shard until its wait: an update before the wait
// is not tied, one after it is.
// CHECK-LABEL: func.func @collective
// CHECK-SAME: train.tied_results = array<i64: -1, 1, -1>
func.func @collective(%p: tensor<4xf32> {train.param = "p"}, %q: tensor<4xf32> {train.param = "q"})
    -> (tensor<4xf32> {train.param = "p"}, tensor<4xf32> {train.param = "q"}, tensor<8xf32>) {
  %comm = coll.comm_world : !coll.comm<2>
  %f = coll.all_gather_start %p on %comm gather_axis = 0
      : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %e = tensor.empty() : tensor<4xf32>
  %p2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%p : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.mulf %x, %x : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %full = coll.wait %f : !coll.future<tensor<8xf32>>
  %e2 = tensor.empty() : tensor<4xf32>
  %q2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%q : tensor<4xf32>) outs(%e2 : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.mulf %x, %x : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %p2, %q2, %full : tensor<4xf32>, tensor<4xf32>, tensor<8xf32>
}

// -----

#id = affine_map<(i) -> (i)>

// The update reads its argument through a view, in reverse (other indices
// than it writes): not tied.
// CHECK-LABEL: func.func @through_a_view
// CHECK-NOT: train.tied_results
func.func @through_a_view(%p: tensor<8xf32> {train.param = "p"}) -> (tensor<8xf32> {train.param = "p"}) {
  %v = tensor.expand_shape %p [[0, 1]] output_shape [2, 4] : tensor<8xf32> into tensor<2x4xf32>
  %e = tensor.empty() : tensor<8xf32>
  %p2 = linalg.generic {indexing_maps = [affine_map<(i) -> ((7 - i) floordiv 4, (7 - i) mod 4)>, #id],
                        iterator_types = ["parallel"]}
      ins(%v : tensor<2x4xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<8xf32>
  return %p2 : tensor<8xf32>
}
