// Tests that zero-partition stage 3 releases a gathered parameter after the
// last op that reads it through a view: a slice or a reshape of the gathered
// tensor is the gathered buffer itself once bufferized (a learned position
// table sliced to the sequence, `pos[:seq]`), so releasing it after the
// slice would let the add read freed memory.
// RUN: loom-opt %s -zero-partition="stage=3 world-size=4" | FileCheck %s

// CHECK-LABEL: func.func @positions(
// CHECK: %[[G:.+]] = coll.wait %{{.+}} : !coll.future<tensor<64xf32>>
// CHECK: %[[FULL:.+]] = tensor.expand_shape %[[G]]
// CHECK: %[[SLICE:.+]] = tensor.extract_slice %[[FULL]][0, 0] [4, 4] [1, 1]
// CHECK: %[[ROWS:.+]] = tensor.collapse_shape %[[SLICE]]
// CHECK-NOT: coll.release
// CHECK: linalg.generic {{.*}} ins(%{{.+}}, %[[ROWS]] :
// CHECK: coll.release %[[G]]
func.func @positions(%pos: tensor<16x4xf32> {train.param = "pos"},
                     %x: tensor<16xf32> {train.input = "x"}) -> (tensor<f32> {train.loss}) {
  %rows = tensor.extract_slice %pos[0, 0] [4, 4] [1, 1] : tensor<16x4xf32> to tensor<4x4xf32>
  %flat = tensor.collapse_shape %rows [[0, 1]] : tensor<4x4xf32> into tensor<16xf32>
  %e = tensor.empty() : tensor<16xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                         iterator_types = ["parallel"]}
      ins(%x, %flat : tensor<16xf32>, tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %zero = arith.constant 0.0 : f32
  %ez = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%ez : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                          iterator_types = ["reduction"]}
      ins(%sum : tensor<16xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}
