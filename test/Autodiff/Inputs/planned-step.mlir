// A planned step: its in-place table (train.tied_results, one entry per
// result) indexes the arguments and results the optimizer would change.
func.func @planned(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"})
    attributes {train.tied_results = array<i64: -1, -1>} {
  %l = tensor.empty() : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}
