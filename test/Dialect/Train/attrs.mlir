// Tests that the train role attributes verify and round-trip where they are
// valid.
// RUN: loom-opt %s | loom-opt | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{.+}}: tensor<256x64xbf16> {train.param = "embed"}
// CHECK-SAME: %{{.+}}: tensor<64x64xf32> {train.param = "layers.0.attn.wq"}
// CHECK-SAME: %{{.+}}: tensor<4x128xi32> {train.input = "tokens"}
// CHECK-SAME: %{{.+}}: tensor<4x128xi32> {train.input}
// CHECK-SAME: -> (tensor<f32> {train.loss})
func.func @forward(%embed: tensor<256x64xbf16> {train.param = "embed"},
                   %wq: tensor<64x64xf32> {train.param = "layers.0.attn.wq"},
                   %tokens: tensor<4x128xi32> {train.input = "tokens"},
                   %labels: tensor<4x128xi32> {train.input})
    -> (tensor<f32> {train.loss}) {
  %zero = arith.constant dense<0.0> : tensor<f32>
  return %zero : tensor<f32>
}

// A scalar loss, untagged arguments and extra untagged results are fine, and
// a declaration can carry roles too.
// CHECK-LABEL: func.func @scalar_loss
// CHECK-SAME: -> (f32 {train.loss}, tensor<8xf32>)
func.func @scalar_loss(%x: tensor<8xf32>) -> (f32 {train.loss}, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  return %zero, %x : f32, tensor<8xf32>
}

// CHECK-LABEL: func.func private @declared
// CHECK-SAME: {train.param = "w"}
func.func private @declared(tensor<4xf16> {train.param = "w"}) -> (tensor<f16> {train.loss})

// A training step after the optimizer: updated parameters and state name their
// arguments.
// CHECK-LABEL: func.func private @step
// CHECK-SAME: {train.state = "w.m"}
// CHECK-SAME: -> (f32 {train.loss}, tensor<4xf32> {train.grad = "w"}, tensor<4xf32> {train.param = "w"}, tensor<4xf32> {train.state = "w.m"})
func.func private @step(tensor<4xf32> {train.param = "w"}, tensor<4xf32> {train.state = "w.m"})
    -> (f32 {train.loss}, tensor<4xf32> {train.grad = "w"}, tensor<4xf32> {train.param = "w"}, tensor<4xf32> {train.state = "w.m"})

// Roles survive bufferisation.
// CHECK-LABEL: func.func private @bufferized
// CHECK-SAME: (memref<4xf32> {train.param = "w"}, memref<8xi32> {train.input}) -> (memref<f32> {train.loss})
func.func private @bufferized(memref<4xf32> {train.param = "w"}, memref<8xi32> {train.input}) -> (memref<f32> {train.loss})
