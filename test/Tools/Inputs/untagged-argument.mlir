// A forward with an argument that has no train role (loomc: the entry phase fails).
func.func @f(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<4xf32>) -> (tensor<f32> {train.loss}) {
  %e = tensor.empty() : tensor<4xf32>
  %m = linalg.mul ins(%w, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %s = linalg.reduce ins(%m : tensor<4xf32>) outs(%f : tensor<f32>) dimensions = [0]
    (%a: f32, %b: f32) { %r = arith.addf %a, %b : f32
      linalg.yield %r : f32 }
  return %s : tensor<f32>
}
