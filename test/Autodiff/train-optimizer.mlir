// Tests train-optimizer: the state it adds, the results it returns, and the
// update it computes (numerics against PyTorch are in test/Numerics).
// RUN: loom-opt %s -split-input-file -train-optimizer="kind=adamw lr=0.01 weight-decay=0.1" | FileCheck %s --check-prefix=ADAMW
// RUN: loom-opt %s -split-input-file -train-optimizer="kind=sgd lr=0.5" | FileCheck %s --check-prefix=SGD
// RUN: loom-opt %s -split-input-file -train-optimizer="kind=adamw lr-input=true" | FileCheck %s --check-prefix=LRIN
// RUN: loom-opt %s -split-input-file -train-optimizer="kind=sgd lr-input=true" | FileCheck %s --check-prefix=SGDLRIN

// ADAMW-LABEL: func.func @step
// ADAMW-SAME: (%[[W:.+]]: tensor<4xf32> {train.param = "w"},
// ADAMW-SAME: %[[T:.+]]: tensor<f32> {train.state = "step"}, %[[M:.+]]: tensor<4xf32> {train.state = "w.m"}, %[[V:.+]]: tensor<4xf32> {train.state = "w.v"},
// ADAMW-SAME: %{{.+}}: tensor<4xf32> {train.input})
// ADAMW-SAME: -> (tensor<f32> {train.loss}, tensor<4xf32> {train.param = "w"}, tensor<f32> {train.state = "step"}, tensor<4xf32> {train.state = "w.m"}, tensor<4xf32> {train.state = "w.v"})
// The step counter, then 1 - beta^t for both moments.
// ADAMW: %[[T1:.+]] = linalg.generic {{.*}} ins(%[[T]] : tensor<f32>)
// ADAMW: math.powf
// ADAMW: math.powf
// ADAMW: %[[NM:.+]] = linalg.generic {{.*}} ins(%[[M]], %[[G:.+]] : tensor<4xf32>, tensor<4xf32>)
// ADAMW: %[[NV:.+]] = linalg.generic {{.*}} ins(%[[V]], %[[G]] : tensor<4xf32>, tensor<4xf32>)
// ADAMW: %[[NW:.+]] = linalg.generic {{.*}} ins(%[[W]], %[[NM]], %[[NV]], %{{.+}}, %{{.+}} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>)
// p - lr (mhat / (sqrt(vhat) + eps) + wd p)
// ADAMW: math.sqrt
// ADAMW: arith.constant 9.99999993E-9 : f32
// ADAMW: arith.constant 1.000000e-01 : f32
// ADAMW: arith.constant 0.00999999977 : f32
// ADAMW: return %{{.+}}, %[[NW]], %[[T1]], %[[NM]], %[[NV]]

// SGD-LABEL: func.func @step
// SGD-SAME: (%[[W:.+]]: tensor<4xf32> {train.param = "w"}, %{{.+}}: tensor<4xf32> {train.input})
// SGD-SAME: -> (tensor<f32> {train.loss}, tensor<4xf32> {train.param = "w"})
// SGD: %[[NW:.+]] = linalg.generic {{.*}} ins(%[[W]], %{{.+}} : tensor<4xf32>, tensor<4xf32>)
// SGD: arith.constant 5.000000e-01 : f32
// SGD: return %{{.+}}, %[[NW]] : tensor<f32>, tensor<4xf32>
// With lr-input the learning rate is the last argument, a 0-d input, and
// each update reads it instead of a constant.
// LRIN-LABEL: func.func @step
// LRIN-SAME: %{{.+}}: tensor<4xf32> {train.input}, %[[LR:[a-z0-9]+]]: tensor<f32> {train.input = "lr"})
// LRIN: linalg.generic {{.*}} ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[LR]] : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>)
// LRIN-NOT: arith.constant 0.00999999977 : f32
// LRIN: return
// SGDLRIN-LABEL: func.func @step
// SGDLRIN-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {train.input = "lr"})
// SGDLRIN: linalg.generic {{.*}} ins(%{{.+}}, %{{.+}}, %[[LR]] : tensor<4xf32>, tensor<4xf32>, tensor<f32>)
// SGDLRIN-NOT: arith.constant 5.000000e-01 : f32
func.func @step(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<4xf32> {train.input})
    -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %l = linalg.dot ins(%w, %x : tensor<4xf32>, tensor<4xf32>) outs(%f : tensor<f32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}
