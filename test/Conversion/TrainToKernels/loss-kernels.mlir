// convert-train-to-kernels{loss-kernels}: the fused loss keeps its chunk loops and
// matmuls, but each chunk's log-sum-exp and loss, and its logits' gradient,
// are the runtime's row kernels (train.call_kernel).
// RUN: loom-opt %s -split-input-file -convert-train-to-kernels=embedding-kernel=false -train-decompose | FileCheck %s

// f32 with a soft-cap: the kernels cap the logits themselves (no tanh in
// the IR), and the gradient kernel overwrites the recomputed logits.
// The forward's scalars: rows, vocab, ignore_index, smoothing, z-loss and
// cap.
// CHECK-LABEL: func.func @f32
// CHECK-NOT: math.tanh
// CHECK: scf.for
// CHECK: %[[Z:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<16x32xf32>)
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[VOCAB:.*]] = arith.constant 32 : i64
// CHECK-DAG: %[[IGNORE:.*]] = arith.constant -100 : i64
// CHECK-DAG: %[[LS:.*]] = arith.constant 1.000000e-01 : f64
// CHECK-DAG: %[[ZL:.*]] = arith.constant 1.000000e-04 : f64
// CHECK-DAG: %[[CAP:.*]] = arith.constant 3.000000e+01 : f64
// CHECK: train.call_kernel @loomrt_cross_entropy_f32(%[[ROWS]], %[[VOCAB]], %[[IGNORE]], %[[LS]], %[[ZL]], %[[CAP]] : i64, i64, i64, f64, f64, f64)
// CHECK-SAME: ins(%[[Z]], %{{.*}} : tensor<16x32xf32>, tensor<16xi32>) outs({{.*}}) -> tensor<16xf32>, tensor<16xf32>
// CHECK: scf.for
// CHECK: %[[Z2:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<16x32xf32>)
// CHECK: %[[G:.*]] = train.call_kernel @loomrt_cross_entropy_grad_f32(%{{.*}} : i64, i64, i64, i64, f64, f64, f64) ins(%{{.*}} : tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) outs(%[[Z2]] : tensor<16x32xf32>) {read_outputs = array<i64: 0>} -> tensor<16x32xf32>
// CHECK: linalg.generic {{.*}} ins(%[[G]], %arg1 : tensor<16x32xf32>, tensor<32x16xf32>)
// CHECK-NOT: math.tanh
func.func @f32(%h: tensor<64x16xf32>, %w: tensor<32x16xf32>, %labels: tensor<64xi32>, %dl: tensor<f32>)
    -> (tensor<f32>, tensor<64x16xf32>, tensor<32x16xf32>) {
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.1 z_loss = 1.0e-4 softcap = 30.0 chunk_tokens = 16 : tensor<64x16xf32>, tensor<32x16xf32>, tensor<64xi32> -> tensor<f32>, tensor<64xf32>
  %dh, %dw = train.linear_cross_entropy_grad %h, %w, %labels, %lse, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.1 z_loss = 1.0e-4 softcap = 30.0 chunk_tokens = 16 : tensor<64x16xf32>, tensor<32x16xf32>, tensor<64xi32>, tensor<64xf32>, tensor<f32>
  return %loss, %dh, %dw : tensor<f32>, tensor<64x16xf32>, tensor<32x16xf32>
}

// -----

// bf16 with i64 labels: the labels are narrowed to the kernels' i32, an
// ignored one to the ignore_index, one outside the vocabulary to -1 (never
// wrapped into it); the gradient kernel rounds the gradient to bf16 for
// the GEMMs.
// CHECK-LABEL: func.func @bf16
// CHECK: ^bb0(%[[L:.*]]: i64, %{{.*}}: i32):
// CHECK: %[[IGN:.*]] = arith.cmpi eq, %[[L]], %{{.*}} : i64
// CHECK: %[[GE:.*]] = arith.cmpi sge, %[[L]], %{{.*}} : i64
// CHECK: %[[LT:.*]] = arith.cmpi slt, %[[L]], %{{.*}} : i64
// CHECK: %[[IN:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK: %[[T:.*]] = arith.trunci %[[L]] : i64 to i32
// CHECK: %[[M1:.*]] = arith.constant -1 : i32
// CHECK: %[[K:.*]] = arith.select %[[IN]], %[[T]], %[[M1]] : i32
// CHECK: %[[M100:.*]] = arith.constant -100 : i32
// CHECK: arith.select %[[IGN]], %[[M100]], %[[K]] : i32
// CHECK: train.call_kernel @loomrt_cross_entropy_f32
// CHECK: %[[G:.*]] = train.call_kernel @loomrt_cross_entropy_grad_bf16({{.*}}) ins(%{{.*}} : tensor<16x32xf32>, tensor<16xi32>, tensor<16xf32>, tensor<16xf32>) outs(%{{.*}} : tensor<16x32xbf16>) -> tensor<16x32xbf16>
// CHECK-NOT: read_outputs
// CHECK: linalg.generic {{.*}} ins(%[[G]], %arg1 : tensor<16x32xbf16>, tensor<32x16xbf16>)
func.func @bf16(%h: tensor<64x16xbf16>, %w: tensor<32x16xbf16>, %labels: tensor<64xi64>, %dl: tensor<f32>)
    -> (tensor<f32>, tensor<64x16xbf16>, tensor<32x16xbf16>) {
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 : tensor<64x16xbf16>, tensor<32x16xbf16>, tensor<64xi64> -> tensor<f32>, tensor<64xf32>
  %dh, %dw = train.linear_cross_entropy_grad %h, %w, %labels, %lse, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 : tensor<64x16xbf16>, tensor<32x16xbf16>, tensor<64xi64>, tensor<64xf32>, tensor<f32>
  return %loss, %dh, %dw : tensor<f32>, tensor<64x16xbf16>, tensor<32x16xbf16>
}

// -----

// bf16 with a bias: dbias sums the f32 gradient, so the kernel writes it
// in place and the GEMMs take a rounded copy.
// CHECK-LABEL: func.func @bf16_bias
// CHECK: %[[G:.*]] = train.call_kernel @loomrt_cross_entropy_grad_f32({{.*}}) outs(%{{.*}} : tensor<16x32xf32>) {read_outputs = array<i64: 0>}
// CHECK: linalg.generic {{.*}} ins(%[[G]] : tensor<16x32xf32>) outs(%{{.*}} : tensor<16x32xbf16>)
// CHECK: arith.truncf
func.func @bf16_bias(%h: tensor<64x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xbf16>, %labels: tensor<64xi32>, %dl: tensor<64xf32>)
    -> (tensor<64x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16>) {
  %dh, %dw, %db = train.linear_cross_entropy_grad %h, %w bias %b, %labels, %dl, %dl ignore_index = -100 reduction = <none> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 : tensor<64x16xbf16>, tensor<32x16xbf16>, tensor<64xi32>, tensor<64xf32>, tensor<64xf32>, tensor<32xbf16> -> tensor<32xbf16>
  return %dh, %dw, %db : tensor<64x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16>
}

// -----

// Vocabulary blocks: the forward keeps its linalg online log-sum-exp; the
// gradient kernel's scalars are the rows, the block's width, its first
// column, the whole vocabulary, smoothing, z-loss and cap.
// CHECK-LABEL: func.func @blocks
// CHECK-NOT: @loomrt_cross_entropy_f32
// CHECK: %[[COL:.*]] = arith.index_cast %{{.*}} : index to i64
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[WIDTH:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[TOTAL:.*]] = arith.constant 32 : i64
// CHECK-DAG: %[[LS:.*]] = arith.constant 2.500000e-01 : f64
// CHECK-DAG: %[[ZL:.*]] = arith.constant 1.000000e-03 : f64
// CHECK-DAG: %[[CAP:.*]] = arith.constant 5.000000e+00 : f64
// CHECK: train.call_kernel @loomrt_cross_entropy_grad_f32(%[[ROWS]], %[[WIDTH]], %[[COL]], %[[TOTAL]], %[[LS]], %[[ZL]], %[[CAP]] : i64, i64, i64, i64, f64, f64, f64)
func.func @blocks(%h: tensor<64x16xf32>, %w: tensor<32x16xf32>, %labels: tensor<64xi32>, %dl: tensor<f32>)
    -> (tensor<f32>, tensor<64x16xf32>, tensor<32x16xf32>) {
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.25 z_loss = 1.0e-3 softcap = 5.0 chunk_tokens = 16 chunk_vocab = 8 : tensor<64x16xf32>, tensor<32x16xf32>, tensor<64xi32> -> tensor<f32>, tensor<64xf32>
  %dh, %dw = train.linear_cross_entropy_grad %h, %w, %labels, %lse, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.25 z_loss = 1.0e-3 softcap = 5.0 chunk_tokens = 16 chunk_vocab = 8 : tensor<64x16xf32>, tensor<32x16xf32>, tensor<64xi32>, tensor<64xf32>, tensor<f32>
  return %loss, %dh, %dw : tensor<f32>, tensor<64x16xf32>, tensor<32x16xf32>
}

// -----

// f64 keeps the linalg decomposition (the kernels compute in f32).
// CHECK-LABEL: func.func @f64
// CHECK-NOT: train.call_kernel
// CHECK: return
func.func @f64(%h: tensor<64x16xf64>, %w: tensor<32x16xf64>, %labels: tensor<64xi32>, %dl: tensor<f64>)
    -> (tensor<f64>, tensor<64x16xf64>, tensor<32x16xf64>) {
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 : tensor<64x16xf64>, tensor<32x16xf64>, tensor<64xi32> -> tensor<f64>, tensor<64xf64>
  %dh, %dw = train.linear_cross_entropy_grad %h, %w, %labels, %lse, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 : tensor<64x16xf64>, tensor<32x16xf64>, tensor<64xi32>, tensor<64xf64>, tensor<f64>
  return %loss, %dh, %dw : tensor<f64>, tensor<64x16xf64>, tensor<32x16xf64>
}

// -----

// f16 has no gradient kernel of its own: the f32 one in place, then a
// rounded copy for the GEMMs. i8 labels are sign-extended (a vocabulary
// beyond i8's range: every non-negative label is in it).
// CHECK-LABEL: func.func @f16
// CHECK: arith.extsi %{{.*}} : i8 to i32
// CHECK-NOT: arith.cmpi slt
// CHECK: train.call_kernel @loomrt_cross_entropy_f32
// CHECK: %[[G:.*]] = train.call_kernel @loomrt_cross_entropy_grad_f32({{.*}}) {read_outputs = array<i64: 0>}
// CHECK: linalg.generic {{.*}} ins(%[[G]] : tensor<16x300xf32>) outs(%{{.*}} : tensor<16x300xf16>)
func.func @f16(%h: tensor<64x16xf16>, %w: tensor<300x16xf16>, %labels: tensor<64xi8>, %dl: tensor<f32>)
    -> (tensor<f32>, tensor<64x16xf16>, tensor<300x16xf16>) {
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 : tensor<64x16xf16>, tensor<300x16xf16>, tensor<64xi8> -> tensor<f32>, tensor<64xf32>
  %dh, %dw = train.linear_cross_entropy_grad %h, %w, %labels, %lse, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 : tensor<64x16xf16>, tensor<300x16xf16>, tensor<64xi8>, tensor<64xf32>, tensor<f32>
  return %loss, %dh, %dw : tensor<f32>, tensor<64x16xf16>, tensor<300x16xf16>
}

// -----

// bf16 over vocabulary blocks: the labels are converted once a chunk,
// outside the block loop, and each block's gradient is rounded to bf16.
// CHECK-LABEL: func.func @bf16_blocks
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.trunci %{{.*}} : i64 to i32
// CHECK: scf.for
// CHECK-NOT: arith.trunci
// CHECK: train.call_kernel @loomrt_cross_entropy_grad_bf16({{.*}}) ins({{.*}}) outs(%{{.*}} : tensor<16x8xbf16>)
func.func @bf16_blocks(%h: tensor<64x16xbf16>, %w: tensor<32x16xbf16>, %labels: tensor<64xi64>, %dl: tensor<f32>)
    -> (tensor<f32>, tensor<64x16xbf16>, tensor<32x16xbf16>) {
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 chunk_vocab = 8 : tensor<64x16xbf16>, tensor<32x16xbf16>, tensor<64xi64> -> tensor<f32>, tensor<64xf32>
  %dh, %dw = train.linear_cross_entropy_grad %h, %w, %labels, %lse, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 16 chunk_vocab = 8 : tensor<64x16xbf16>, tensor<32x16xbf16>, tensor<64xi64>, tensor<64xf32>, tensor<f32>
  return %loss, %dh, %dw : tensor<f32>, tensor<64x16xbf16>, tensor<32x16xbf16>
}
