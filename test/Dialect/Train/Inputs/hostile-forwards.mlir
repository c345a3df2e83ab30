// A parameter added to the batch element-wise: its dimension 0 is the
// batch, and only train.input arguments are sliced into microbatches.
func.func @bias_per_row(%x: tensor<4x8xf32> {train.input = "x"},
                        %b: tensor<4x8xf32> {train.param = "b"},
                        %labels: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.add ins(%x, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %loss = train.cross_entropy %y, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A forward that ends in a terminator of an unknown dialect.
func.func @unknown_terminator(%x: tensor<4x8xf32> {train.input = "x"},
                              %labels: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  %loss = train.cross_entropy %x, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  "foo.return"(%loss) : (tensor<f32>) -> ()
}
