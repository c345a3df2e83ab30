// Tests train-drop-roles: every train role goes, other attributes stay.
// RUN: loom-opt %s -train-drop-roles | FileCheck %s

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%{{.+}}: tensor<4xf32>, %{{.+}}: tensor<4xf32> {llvm.noalias}, %{{.+}}: tensor<f32>)
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32>)
// CHECK-NOT: train.
func.func @step(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<4xf32> {llvm.noalias, train.full_shape = array<i64: 4>, train.input = "x"},
                %s: tensor<f32> {train.state = "step"})
    -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
  %l = tensor.empty() : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}
