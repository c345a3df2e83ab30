// Tests that train-decompose rejects what its decompositions cannot build:
// dynamic shapes (temporaries are sized from static shapes).
// RUN: loom-opt %s -split-input-file -train-decompose -verify-diagnostics

func.func @dynamic_rows(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'train.rms_norm' op train-decompose: expected static shapes that fit in 64 bits, got 'tensor<?x64xf32>'}}
  %y = train.rms_norm %x, %w eps = 1.0e-05 : tensor<?x64xf32>, tensor<64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// MLIR's verifier accepts an output_shape that disagrees with the result
// type; bufferized, it would be invalid IR.
func.func @expand_shape_disagrees(%x: tensor<128x32xf32>) -> tensor<4x32x2x16xf32> {
  // expected-error @+1 {{'tensor.expand_shape' op train-decompose: output_shape[0] is 3 but the result type 'tensor<4x32x2x16xf32>' says 4}}
  %y = tensor.expand_shape %x [[0, 1], [2, 3]] output_shape [3, 32, 2, 16] : tensor<128x32xf32> into tensor<4x32x2x16xf32>
  return %y : tensor<4x32x2x16xf32>
}
