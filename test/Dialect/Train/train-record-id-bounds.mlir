// Tests train-record-id-bounds: each input of ids gets the smallest
// vocabulary of the ops that read it, through reshapes and slices; ids
// computed from other values, and non-inputs, get none.
// RUN: loom-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(train-record-id-bounds))' | FileCheck %s

// The tokens index a 64-row table after a collapse; the labels are read
// by the loss over 48 classes and by a 40-row table after a slice: 40.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{.+}}: tensor<4x8xi32> {train.id_bound = 64 : i64, train.input = "tokens"}
// CHECK-SAME: %{{.+}}: tensor<32xi32> {train.id_bound = 40 : i64, train.input = "labels"}
// CHECK-SAME: %{{.+}}: tensor<32xi32> {train.input = "other"}
func.func @forward(%table: tensor<64x16xf32> {train.param = "embed"},
                   %small: tensor<40x16xf32> {train.param = "small"},
                   %logits: tensor<32x48xf32> {train.param = "logits"},
                   %tokens: tensor<4x8xi32> {train.input = "tokens"},
                   %labels: tensor<32xi32> {train.input = "labels"},
                   %other: tensor<32xi32> {train.input = "other"})
    -> (tensor<f32> {train.loss}) {
  %flat = tensor.collapse_shape %tokens [[0, 1]] : tensor<4x8xi32> into tensor<32xi32>
  %h = train.embedding %table[%flat] : tensor<64x16xf32>, tensor<32xi32> -> tensor<32x16xf32>
  %part = tensor.extract_slice %labels[0] [16] [1] : tensor<32xi32> to tensor<16xi32>
  %g = train.embedding %small[%part] : tensor<40x16xf32>, tensor<16xi32> -> tensor<16x16xf32>
  // Ids computed from an input are not the input's: no bound for %other.
  %shifted = arith.addi %other, %other : tensor<32xi32>
  %k = train.embedding %table[%shifted] : tensor<64x16xf32>, tensor<32xi32> -> tensor<32x16xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100
      reduction = <mean> label_smoothing = 0.0 z_loss = 0.0
      : tensor<32x48xf32>, tensor<32xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The fused loss bounds its labels by the weight's rows.
// CHECK-LABEL: func.func @fused
// CHECK-SAME: {train.id_bound = 24 : i64, train.input = "labels"}
func.func @fused(%h: tensor<8x16xf32> {train.param = "h"},
                 %w: tensor<24x16xf32> {train.param = "w"},
                 %labels: tensor<8xi32> {train.input = "labels"})
    -> (tensor<f32> {train.loss}) {
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels
      ignore_index = -100 reduction = <mean> label_smoothing = 0.0
      z_loss = 0.0 softcap = 0.0 chunk_tokens = 4
      : tensor<8x16xf32>, tensor<24x16xf32>, tensor<8xi32>
      -> tensor<f32>, tensor<8xf32>
  return %loss : tensor<f32>
}
