// Tests trainer-record-scheduled-peak: the memory timeline's peak of the
// step, train ops whole, as the scheduler bounded it: with the memory plan's
// rules (64-byte aligned temporaries, results the caller owns).
// RUN: loom-opt %s -split-input-file -trainer-record-scheduled-peak -verify-diagnostics | FileCheck %s

// At the add, the 16-byte argument, both temporaries (64 bytes each,
// aligned) and the 4-byte loss the caller holds for the whole step: 148.
// CHECK-LABEL: func.func @step
// CHECK-SAME: attributes {train.scheduled_peak_bytes = 148 : i64}
func.func @step(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %e = tensor.empty() : tensor<4xf32>
  %m = linalg.mul ins(%w, %w : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %a = linalg.add ins(%m, %w : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  %s = tensor.empty() : tensor<f32>
  %r = linalg.reduce ins(%a : tensor<4xf32>) outs(%s : tensor<f32>) dimensions = [0]
    (%x: f32, %y: f32) {
      %sum = arith.addf %x, %y : f32
      linalg.yield %sum : f32
    }
  return %r : tensor<f32>
}

// -----

// expected-error @+1 {{trainer-record-scheduled-peak: expected a training step (a function with a train.loss result), found none}}
module {
}
