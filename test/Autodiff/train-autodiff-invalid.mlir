// Tests that train-autodiff names what it cannot differentiate.
// RUN: loom-opt %s -split-input-file -allow-unregistered-dialect -train-autodiff -verify-diagnostics

func.func @max_reduction(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  // expected-error @+1 {{reads its output inside the body in a form train-autodiff cannot differentiate (expected `out + f(inputs)`)}}
  %m = linalg.reduce ins(%w : tensor<4xf32>) outs(%f : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %r = arith.maximumf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %m : tensor<f32>
}

// -----

func.func @unknown_op(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  // expected-error @+1 {{'arith.addf' op has no derivative rule in train-autodiff}}
  %d = arith.addf %w, %w : tensor<4xf32>
  %c = arith.constant 0 : index
  %s = tensor.extract %d[%c] : tensor<4xf32>
  %t = tensor.from_elements %s : tensor<f32>
  return %t : tensor<f32>
}

// -----

func.func @unknown_scalar_op(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %m = linalg.reduce ins(%w : tensor<4xf32>) outs(%f : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      // expected-error @+1 {{'math.atan' op has no derivative rule in train-autodiff (inside a linalg body)}}
      %a = math.atan %in : f32
      %r = arith.addf %a, %acc : f32
      linalg.yield %r : f32
    }
  return %m : tensor<f32>
}

// -----

func.func @gather_from_a_param(%w: tensor<4xf32> {train.param = "w"}, %i: tensor<2xi32> {train.input}) -> (tensor<f32> {train.loss}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  // expected-error @+1 {{reads a differentiated value from above inside its body; train-autodiff cannot differentiate it}}
  %m = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>], iterator_types = ["reduction"]}
      ins(%i : tensor<2xi32>) outs(%f : tensor<f32>) {
    ^bb0(%id: i32, %acc: f32):
      %k = arith.index_cast %id : i32 to index
      %v = tensor.extract %w[%k] : tensor<4xf32>
      %r = arith.addf %acc, %v : f32
      linalg.yield %r : f32
  } -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// expected-error @+1 {{train-autodiff expects a single-block function}}
func.func @two_blocks(%w: tensor<f32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  cf.br ^bb1
^bb1:
  return %w : tensor<f32>
}

// -----

func.func @second_derivative(%l: tensor<4x4xf32> {train.param = "l"}, %y: tensor<4xi32> {train.input}) -> (tensor<f32> {train.loss}) {
  %one = arith.constant dense<1.0> : tensor<f32>
  // expected-error @+1 {{is a gradient op; train-autodiff does not compute second derivatives}}
  %g = train.cross_entropy_grad %l, %y, %one ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0
      : tensor<4x4xf32>, tensor<4xi32>, tensor<f32>
  %loss = train.cross_entropy %g, %y ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0
      : tensor<4x4xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// An op of no dialect Loom knows, on the path from a parameter to the loss.
func.func @unknown_op(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  // expected-error @+1 {{'foo.bar' op has no derivative rule in train-autodiff}}
  %u = "foo.bar"(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %e = tensor.empty() : tensor<f32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%u : tensor<4xf32>) outs(%f : tensor<f32>) dimensions = [0]
    (%a: f32, %b: f32) {
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
    }
  return %r : tensor<f32>
}

// -----

// Adjoints are built from static shapes.
// expected-error @+1 {{train-autodiff: expected static shapes that fit in 64 bits, got 'tensor<?xf32>'}}
func.func @dynamic(%w: tensor<?xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %l = tensor.empty() : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Gradients are tensors: a memref parameter has none.
// expected-error @+1 {{'func.func' op train-autodiff differentiates with respect to tensors; parameter argument #0 is 'memref<4xf32>'}}
func.func @memref_param(%w: memref<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %l = tensor.empty() : tensor<f32>
  return %l : tensor<f32>
}

// -----

// A step with optimizer state is past the forward.
// expected-error @+1 {{'func.func' op is already a training step (argument #1 is optimizer state); train-autodiff runs on the forward}}
func.func @already_a_step(%w: tensor<4xf32> {train.param = "w"}, %s: tensor<f32> {train.state = "step"}) -> (tensor<f32> {train.loss}) {
  %l = tensor.empty() : tensor<f32>
  return %l : tensor<f32>
}

// -----

// A planned step (its in-place table is one entry per result) is past the
// forward: a gradient appended would leave the table short (found by
// loom-fuzz).
// expected-error @+1 {{'func.func' op is a planned step (train.tied_results, from codegen-update-in-place); train-autodiff runs on the forward}}
func.func @planned_step(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<4xf32> {train.param = "w"})
    attributes {train.tied_results = array<i64: -1, 0>} {
  %l = tensor.empty() : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

func.func @expand_shape_disagrees(%w: tensor<8xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  // expected-error @+1 {{'tensor.expand_shape' op train-autodiff: output_shape[1] is 2 but the result type 'tensor<2x4xf32>' says 4}}
  %x = tensor.expand_shape %w [[0, 1]] output_shape [2, 2] : tensor<8xf32> into tensor<2x4xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %s = linalg.reduce ins(%x : tensor<2x4xf32>) outs(%f : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %s : tensor<f32>
}
