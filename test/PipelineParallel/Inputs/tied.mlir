// A tied embedding: the same table embeds the tokens and projects the output.
func.func @tied(%embed: tensor<16x8xf32> {train.param = "embed"},
                %w0: tensor<8x8xf32> {train.param = "layers.0.w"},
                %tokens: tensor<4xi32> {train.input = "tokens"},
                %labels: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  %zero = arith.constant 0.0 : f32
  %x = train.embedding %embed[%tokens] : tensor<16x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %el = tensor.empty() : tensor<4x16xf32>
  %zl = linalg.fill ins(%zero : f32) outs(%el : tensor<4x16xf32>) -> tensor<4x16xf32>
  %logits = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%h, %embed : tensor<4x8xf32>, tensor<16x8xf32>) outs(%zl : tensor<4x16xf32>) -> tensor<4x16xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<4x16xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
