// A step whose forward and backward are ops of an unknown dialect, which
// pp-partition cannot place (it cannot tell that they are pure).
func.func @unknown_ops(%x: tensor<4x4xf32> {train.input = "x"},
                       %w0: tensor<4x4xf32> {train.param = "layers.0.w"},
                       %w1: tensor<4x4xf32> {train.param = "layers.1.w"},
                       %labels: tensor<4xi32> {train.input = "labels"})
    -> (tensor<f32> {train.loss}, tensor<4x4xf32> {train.grad = "layers.0.w"},
        tensor<4x4xf32> {train.grad = "layers.1.w"}) {
  %h0 = "foo.mm"(%x, %w0) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %h1 = "foo.mm"(%h0, %w1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %loss = train.cross_entropy %h1, %labels ignore_index = -100 reduction = <mean>
      label_smoothing = 0.0 z_loss = 0.0 : tensor<4x4xf32>, tensor<4xi32> -> tensor<f32>
  %g1 = "foo.grad"(%h0, %loss) : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %g0 = "foo.grad"(%x, %g1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %loss, %g0, %g1 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A step that ends in a terminator of an unknown dialect.
func.func @unknown_terminator(%x: tensor<4x4xf32> {train.input = "x"},
                              %labels: tensor<4xi32> {train.input = "labels"})
    -> (tensor<f32> {train.loss}) {
  "foo.return"() : () -> ()
}
