// Tests train-microbatch on a loss that is scalar ops on one sum over the
// batch (a mean squared error, as the torch importer writes it): the sum is
// taken per microbatch, the microbatches' sums are added, and the ops after
// the sum (here the division by the whole batch's count) run once.
// RUN: not loom-opt %s --split-input-file --train-microbatch=microbatches=2 2>&1 | FileCheck %s --check-prefixes=CHECK,MAX
// MAX: error: train-microbatch: the loss must be the result of train.cross_entropy or train.linear_cross_entropy, or scalar ops on one sum over the batch (a mean squared error), so that it can be summed over microbatches

// CHECK-LABEL: func.func @mse(
// CHECK: %[[S0:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]{{.*}} ins(%{{.+}} : tensor<2x2xf32>) outs(%{{.+}} : tensor<f32>) attrs = {train.microbatch = 0 : i64}
// CHECK: %[[S1:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]{{.*}} ins(%{{.+}} : tensor<2x2xf32>) outs(%{{.+}} : tensor<f32>) attrs = {train.microbatch = 1 : i64}
// CHECK: %[[TOTAL:.+]] = linalg.generic {{.*}} ins(%[[S0]], %[[S1]] : tensor<f32>, tensor<f32>)
// CHECK: %[[MEAN:.+]] = linalg.generic {{.*}} ins(%[[TOTAL]] : tensor<f32>)
// CHECK-NOT: train.microbatch
// CHECK: arith.divf
// CHECK: return %[[MEAN]] : tensor<f32>
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#to0 = affine_map<(i, j) -> ()>
#s = affine_map<() -> ()>
func.func @mse(%w: tensor<2xf32> {train.param = "w"},
               %x: tensor<4x2xf32> {train.input = "x"},
               %y: tensor<4x2xf32> {train.input = "y"}) -> (tensor<f32> {train.loss}) {
  %e = tensor.empty() : tensor<4x2xf32>
  %d = linalg.generic {indexing_maps = [#id, #col, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %w, %y : tensor<4x2xf32>, tensor<2xf32>, tensor<4x2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.subf %p, %c : f32
    %q = arith.mulf %r, %r : f32
    linalg.yield %q : f32
  } -> tensor<4x2xf32>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %sum = linalg.generic {indexing_maps = [#id, #to0], iterator_types = ["reduction", "reduction"]}
      ins(%d : tensor<4x2xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %o, %a : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  %e1 = tensor.empty() : tensor<f32>
  %mean = linalg.generic {indexing_maps = [#s, #s], iterator_types = []}
      ins(%sum : tensor<f32>) outs(%e1 : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.constant 8.0 : f32
    %t = arith.divf %a, %n : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  return %mean : tensor<f32>
}

// -----

// A maximum over the batch is no sum: it cannot be split into microbatches
// (the MAX line above).
func.func @max_loss(%w: tensor<4xf32> {train.param = "w"},
                    %x: tensor<4xf32> {train.input = "x"}) -> (tensor<f32> {train.loss}) {
  %e = tensor.empty() : tensor<4xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x, %w : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    linalg.yield %p : f32
  } -> tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %max = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>], iterator_types = ["reduction"]}
      ins(%d : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.maximumf %o, %a : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  return %max : tensor<f32>
}
