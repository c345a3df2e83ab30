// A step whose gradient of layers.0.w has the location of the head's
// forward op (train-autodiff gives an adjoint its forward op's location):
// it is computed on the head's stage, not on its parameter's.
#map = affine_map<(d0, d1, d2) -> (d0, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map3 = affine_map<(d0, d1, d2) -> (d2, d1)>
#map4 = affine_map<(d0, d1, d2) -> (d2, d0)>
#map5 = affine_map<(d0, d1, d2) -> (d2, d1)>
module {
  func.func @mlp(%arg0: tensor<8x8xf32> {train.param = "layers.0.w"}, %arg1: tensor<8x8xf32> {train.param = "layers.1.w"}, %arg2: tensor<4x8xf32> {train.param = "head"}, %arg3: tensor<4x8xf32> {train.input = "x"}, %arg4: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}, tensor<8x8xf32> {train.grad = "layers.0.w"}, tensor<8x8xf32> {train.grad = "layers.1.w"}, tensor<4x8xf32> {train.grad = "head"}) {
    %cst = arith.constant 1.000000e+00 : f32
    %cst_0 = arith.constant 0.000000e+00 : f32
    %0 = tensor.empty() : tensor<4x8xf32>
    %1 = linalg.fill ins(%cst_0 : f32) outs(%0 : tensor<4x8xf32>) -> tensor<4x8xf32>
    %2 = linalg.matmul ins(%arg3, %arg0 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%1 : tensor<4x8xf32>) -> tensor<4x8xf32>
    %3 = linalg.matmul ins(%2, %arg1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%1 : tensor<4x8xf32>) -> tensor<4x8xf32>
    %4 = tensor.empty() : tensor<4x4xf32>
    %5 = linalg.fill ins(%cst_0 : f32) outs(%4 : tensor<4x4xf32>) -> tensor<4x4xf32>
    %6 = linalg.matmul indexing_maps = [#map, #map1, #map2] ins(%3, %arg2 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%5 : tensor<4x4xf32>) -> tensor<4x4xf32> loc("head")
    %7 = train.cross_entropy %6, %arg4 ignore_index = -100 reduction = <mean> label_smoothing = 0.000000e+00 z_loss = 0.000000e+00 : tensor<4x4xf32>, tensor<4xi32> -> tensor<f32>
    %8 = tensor.empty() : tensor<f32>
    %9 = linalg.fill ins(%cst : f32) outs(%8 : tensor<f32>) -> tensor<f32>
    %10 = train.cross_entropy_grad %6, %arg4, %9 ignore_index = -100 reduction = <mean> label_smoothing = 0.000000e+00 z_loss = 0.000000e+00 : tensor<4x4xf32>, tensor<4xi32>, tensor<f32>
    %11 = linalg.generic {indexing_maps = [#map2, #map1, #map], iterator_types = ["parallel", "reduction", "parallel"]} ins(%10, %arg2 : tensor<4x4xf32>, tensor<4x8xf32>) outs(%1 : tensor<4x8xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %18 = arith.mulf %in, %in_1 : f32
      %19 = arith.addf %out, %18 : f32
      linalg.yield %19 : f32
    } -> tensor<4x8xf32>
    %12 = linalg.generic {indexing_maps = [#map2, #map, #map1], iterator_types = ["reduction", "parallel", "parallel"]} ins(%10, %3 : tensor<4x4xf32>, tensor<4x8xf32>) outs(%1 : tensor<4x8xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %18 = arith.mulf %in, %in_1 : f32
      %19 = arith.addf %out, %18 : f32
      linalg.yield %19 : f32
    } -> tensor<4x8xf32>
    %13 = linalg.generic {indexing_maps = [#map2, #map3, #map], iterator_types = ["parallel", "reduction", "parallel"]} ins(%11, %arg1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%1 : tensor<4x8xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %18 = arith.mulf %in, %in_1 : f32
      %19 = arith.addf %out, %18 : f32
      linalg.yield %19 : f32
    } -> tensor<4x8xf32>
    %14 = tensor.empty() : tensor<8x8xf32>
    %15 = linalg.fill ins(%cst_0 : f32) outs(%14 : tensor<8x8xf32>) -> tensor<8x8xf32>
    %16 = linalg.generic {indexing_maps = [#map2, #map, #map3], iterator_types = ["reduction", "parallel", "parallel"]} ins(%11, %2 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%15 : tensor<8x8xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %18 = arith.mulf %in, %in_1 : f32
      %19 = arith.addf %out, %18 : f32
      linalg.yield %19 : f32
    } -> tensor<8x8xf32>
    %17 = linalg.generic {indexing_maps = [#map2, #map, #map3], iterator_types = ["reduction", "parallel", "parallel"]} ins(%13, %arg3 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%15 : tensor<8x8xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %18 = arith.mulf %in, %in_1 : f32
      %19 = arith.addf %out, %18 : f32
      linalg.yield %19 : f32
    } -> tensor<8x8xf32>
    %20 = linalg.generic {indexing_maps = [#map4, #map5, #map2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%12, %12 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%15 : tensor<8x8xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %18 = arith.mulf %in, %in_1 : f32
      %19 = arith.addf %out, %18 : f32
      linalg.yield %19 : f32
    } -> tensor<8x8xf32> loc("head")
    return %7, %20, %16, %12 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>
  }
}

