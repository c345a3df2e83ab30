// A training step that already has optimizer state, and returns gradients
// again (train-autodiff, train-optimizer, train-autodiff's shape).
func.func @step(%w: tensor<4xf32> {train.param = "w"}, %s: tensor<f32> {train.state = "step"})
    -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
  %l = tensor.empty() : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}
