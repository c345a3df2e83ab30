// Tests that train-autodiff treats integer and i1 values as constants: a
// comparison of a parameter (the mask of a leaky ReLU written with
// torch.where) gets no adjoint, and the select's gradient flows to the
// branch each element took.
// RUN: loom-opt %s --train-autodiff | FileCheck %s

// CHECK-LABEL: func.func @leaky_relu(
// CHECK-SAME: -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "x"})
// CHECK: %[[MASK:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<4xi1>)
// CHECK: arith.cmpf ogt
// CHECK: linalg.generic {{.*}} ins(%[[MASK]], {{.*}}) outs(%{{.+}} : tensor<4xf32>)
// CHECK: arith.select
// CHECK-NOT: arith.cmpf
// CHECK: return
func.func @leaky_relu(%x: tensor<4xf32> {train.param = "x"}) -> (tensor<f32> {train.loss}) {
  %e = tensor.empty() : tensor<4xi1>
  %gt = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xi1>) {
  ^bb0(%a0: f32, %out: i1):
    %b0 = arith.constant 0.0 : f32
    %b1 = arith.cmpf ogt, %a0, %b0 : f32
    linalg.yield %b1 : i1
  } -> tensor<4xi1>
  %e2 = tensor.empty() : tensor<4xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%gt, %x : tensor<4xi1>, tensor<4xf32>) outs(%e2 : tensor<4xf32>) {
  ^bb0(%a0: i1, %a1: f32, %out: f32):
    %c = arith.constant 0.1 : f32
    %m = arith.mulf %a1, %c : f32
    %s = arith.select %a0, %a1, %m : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %z0 = arith.constant 0.0 : f32
  %ez = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%z0 : f32) outs(%ez : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a0: f32, %out: f32):
    %s = arith.addf %out, %a0 : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
