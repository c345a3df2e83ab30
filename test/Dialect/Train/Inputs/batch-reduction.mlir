// A batch-norm-like mean over the batch: microbatches would change it.
func.func @batch_mean(%w: tensor<8xf32> {train.param = "w"},
                      %x: tensor<4x8xf32> {train.input = "x"},
                      %labels: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %mean = linalg.generic {indexing_maps = [affine_map<(b, d) -> (b, d)>, affine_map<(b, d) -> (d)>], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(b, d) -> (b, d)>, affine_map<(b, d) -> (d)>, affine_map<(b, d) -> (d)>, affine_map<(b, d) -> (b, d)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean, %w : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %m: f32, %v: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = arith.mulf %d, %v : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %loss = train.cross_entropy %y, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A loss that is neither a cross-entropy nor a sum over the batch (a
// maximum): microbatches cannot be combined.
func.func @square(%w: tensor<8xf32> {train.param = "w"},
                  %x: tensor<4x8xf32> {train.input = "x"}) -> (tensor<f32> {train.loss}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [affine_map<(b, d) -> (b, d)>, affine_map<(b, d) -> (d)>, affine_map<(b, d) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%x, %w : tensor<4x8xf32>, tensor<8xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    %p = arith.mulf %a, %v : f32
    %s = arith.maximumf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A constant the size of the batch: its clones would need a slice of it.
func.func @batch_constant(%w: tensor<8x4xf32> {train.param = "w"},
                          %x: tensor<4x8xf32> {train.input = "x"},
                          %labels: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  %bias = arith.constant dense<0.5> : tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.add ins(%x, %bias : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %el = tensor.empty() : tensor<4x4xf32>
  %zl = linalg.fill ins(%zero : f32) outs(%el : tensor<4x4xf32>) -> tensor<4x4xf32>
  %logits = linalg.matmul ins(%y, %w : tensor<4x8xf32>, tensor<8x4xf32>) outs(%zl : tensor<4x4xf32>) -> tensor<4x4xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<4x4xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
