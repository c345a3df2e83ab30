// convert-train-to-kernels: an op the kernel does not take is left to
// train-decompose's linalg, with a remark; with `cuda`, so is one outside
// the CUDA kernel's domain. verify-diagnostics counts the remarks.
// RUN: loom-opt %s -split-input-file -verify-diagnostics -convert-train-to-kernels=cuda -train-decompose | FileCheck %s

// i64 ids: the scatter-add takes i32.
// CHECK-LABEL: func.func @i64_ids
// CHECK-NOT: train.call_kernel
// CHECK: scf.for
func.func @i64_ids(%g: tensor<8x6xf32>, %ids: tensor<8xi64>) -> tensor<16x6xf32> {
  // expected-remark @+1 {{convert-train-to-kernels: embedding-kernel: the kernel takes i32 ids; left to train-decompose}}
  %t = train.embedding_grad %g[%ids] : tensor<8x6xf32>, tensor<8xi64> -> tensor<16x6xf32>
  return %t : tensor<16x6xf32>
}

// -----

// An f16 table.
// CHECK-LABEL: func.func @f16_table
// CHECK-NOT: train.call_kernel
func.func @f16_table(%g: tensor<8x6xf16>, %ids: tensor<8xi32>) -> tensor<16x6xf16> {
  // expected-remark @+1 {{embedding-kernel: the kernel takes an f32 or bf16 table}}
  %t = train.embedding_grad %g[%ids] : tensor<8x6xf16>, tensor<8xi32> -> tensor<16x6xf16>
  return %t : tensor<16x6xf16>
}

// -----

// The fused loss's forward split in vocabulary blocks of 16: its row work
// stays linalg; the gradient still calls the kernels.
// CHECK-LABEL: func.func @vocab_blocks
// CHECK-NOT: @loomrt_cross_entropy_f32
// CHECK: train.call_kernel @loomrt_cross_entropy_grad_f32
func.func @vocab_blocks(%h: tensor<64x16xf32>, %w: tensor<32x16xf32>, %labels: tensor<64xi32>, %dl: tensor<f32>)
    -> (tensor<f32>, tensor<64x16xf32>, tensor<32x16xf32>) {
  // expected-remark @+1 {{convert-train-to-kernels: loss-kernels: the forward runs in vocabulary blocks of 16, which the kernels do not take; left to train-decompose}}
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 chunk_vocab = 16 : tensor<64x16xf32>, tensor<32x16xf32>, tensor<64xi32> -> tensor<f32>, tensor<64xf32>
  %dh, %dw = train.linear_cross_entropy_grad %h, %w, %labels, %lse, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 chunk_vocab = 16 : tensor<64x16xf32>, tensor<32x16xf32>, tensor<64xi32>, tensor<64xf32>, tensor<f32>
  return %loss, %dh, %dw : tensor<f32>, tensor<64x16xf32>, tensor<32x16xf32>
}

// -----

// 2^31 tokens: the CUDA scatter-add addresses tokens in int.
// CHECK-LABEL: func.func @too_many_tokens
// CHECK-NOT: train.call_kernel
func.func @too_many_tokens(%g: tensor<2147483648x2xf32>, %ids: tensor<2147483648xi32>) -> tensor<16x2xf32> {
  // expected-remark @+1 {{embedding-kernel: 2147483648 tokens or a table this shape is outside the CUDA kernel's domain}}
  %t = train.embedding_grad %g[%ids] : tensor<2147483648x2xf32>, tensor<2147483648xi32> -> tensor<16x2xf32>
  return %t : tensor<16x2xf32>
}

// -----

// A vocabulary of 4096 x 65535 + 1 entries: more grid columns than CUDA's
// 65535 (both the loss and its gradient).
// CHECK-LABEL: func.func @huge_vocab
// CHECK-NOT: train.call_kernel
func.func @huge_vocab(%h: tensor<4x2xf32>, %w: tensor<268431361x2xf32>, %labels: tensor<4xi32>, %dl: tensor<f32>)
    -> (tensor<f32>, tensor<4x2xf32>, tensor<268431361x2xf32>) {
  // expected-remark @+1 {{loss-kernels: chunks of 4 rows by 268431361 columns are outside the CUDA kernels' domain}}
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 4 : tensor<4x2xf32>, tensor<268431361x2xf32>, tensor<4xi32> -> tensor<f32>, tensor<4xf32>
  // expected-remark @+1 {{loss-kernels: chunks of 4 rows by 268431361 columns are outside the CUDA kernels' domain}}
  %dh, %dw = train.linear_cross_entropy_grad %h, %w, %labels, %lse, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 4 : tensor<4x2xf32>, tensor<268431361x2xf32>, tensor<4xi32>, tensor<4xf32>, tensor<f32>
  return %loss, %dh, %dw : tensor<f32>, tensor<4x2xf32>, tensor<268431361x2xf32>
}

// -----

// Inside every domain: both kernels, no remark.
// CHECK-LABEL: func.func @taken
// CHECK: train.call_kernel @loomrt_cross_entropy_f32
// CHECK: train.call_kernel @loomrt_embedding_grad_f32
func.func @taken(%h: tensor<64x16xf32>, %w: tensor<32x16xf32>, %labels: tensor<64xi32>,
                 %g: tensor<8x6xf32>, %ids: tensor<8xi32>) -> (tensor<f32>, tensor<16x6xf32>) {
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 : tensor<64x16xf32>, tensor<32x16xf32>, tensor<64xi32> -> tensor<f32>, tensor<64xf32>
  %t = train.embedding_grad %g[%ids] : tensor<8x6xf32>, tensor<8xi32> -> tensor<16x6xf32>
  return %loss, %t : tensor<f32>, tensor<16x6xf32>
}
