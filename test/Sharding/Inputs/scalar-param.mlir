// A step whose only parameter is 0-d and is the loss itself.
func.func @step(%w: tensor<f32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  return %w : tensor<f32>
}
