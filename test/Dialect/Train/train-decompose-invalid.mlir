// Tests that train-decompose rejects what its decompositions cannot build:
// dynamic shapes (temporaries are sized from static shapes).
// RUN: loom-opt %s -split-input-file -train-decompose -verify-diagnostics

func.func @dynamic_rows(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'train.rms_norm' op train-decompose: expected static shapes that fit in 64 bits, got 'tensor<?x64xf32>'}}
  %y = train.rms_norm %x, %w eps = 1.0e-05 : tensor<?x64xf32>, tensor<64xf32>
  return %y : tensor<?x64xf32>
}
