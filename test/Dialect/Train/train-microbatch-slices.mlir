// Tests train-microbatch on slices and concatenations (GPT-2's fused QKV
// split, Hugging Face's rotate-half RoPE): they carry the batch along the
// dimensions they take whole, and their microbatch clones take half of it.
// A slice that narrows the batch itself has no rule and is an error.
// RUN: loom-opt %s --split-input-file --verify-diagnostics --train-microbatch=microbatches=2 | FileCheck %s

// CHECK-LABEL: func.func @fused_qkv(
// CHECK: %[[X0:.+]] = tensor.extract_slice %arg2[0, 0] [2, 8] [1, 1] {train.microbatch = 0 : i64}
// CHECK: %[[QKV0:.+]] = linalg.matmul {train.microbatch = 0 : i64} ins(%[[X0]], %arg0 : tensor<2x8xf32>, tensor<8x24xf32>)
// CHECK: %[[Q0:.+]] = tensor.extract_slice %[[QKV0]][0, 0] [2, 8] [1, 1] {train.microbatch = 0 : i64} : tensor<2x24xf32> to tensor<2x8xf32>
// CHECK: %[[V0:.+]] = tensor.extract_slice %[[QKV0]][0, 16] [2, 8] [1, 1] {train.microbatch = 0 : i64} : tensor<2x24xf32> to tensor<2x8xf32>
// CHECK: tensor.concat dim(1) %[[V0]], %[[Q0]] {train.microbatch = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16xf32>
// CHECK: tensor.insert_slice %{{.+}} into %{{.+}}[0, 4] [2, 4] [1, 1] {train.microbatch = 0 : i64} : tensor<2x4xf32> into tensor<2x16xf32>
// CHECK: tensor.extract_slice %arg2[2, 0] [2, 8] [1, 1] {train.microbatch = 1 : i64}
// CHECK: tensor.concat dim(1) {{.*}}{train.microbatch = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16xf32>
func.func @fused_qkv(%w: tensor<8x24xf32> {train.param = "qkv"},
                     %head: tensor<4x16xf32> {train.param = "head"},
                     %x: tensor<4x8xf32> {train.input = "x"},
                     %labels: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x24xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x24xf32>) -> tensor<4x24xf32>
  %qkv = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x24xf32>) outs(%z : tensor<4x24xf32>) -> tensor<4x24xf32>
  %q = tensor.extract_slice %qkv[0, 0] [4, 8] [1, 1] : tensor<4x24xf32> to tensor<4x8xf32>
  %v = tensor.extract_slice %qkv[0, 16] [4, 8] [1, 1] : tensor<4x24xf32> to tensor<4x8xf32>
  %cat = tensor.concat dim(1) %v, %q : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  %part = tensor.extract_slice %q[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %h = tensor.insert_slice %part into %cat[0, 4] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x16xf32>
  %el = tensor.empty() : tensor<4x4xf32>
  %zl = linalg.fill ins(%zero : f32) outs(%el : tensor<4x4xf32>) -> tensor<4x4xf32>
  %logits = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%h, %head : tensor<4x16xf32>, tensor<4x16xf32>) outs(%zl : tensor<4x4xf32>) -> tensor<4x4xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<4x4xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @narrows_the_batch(%head: tensor<4x8xf32> {train.param = "head"},
                             %x: tensor<4x8xf32> {train.input = "x"},
                             %labels: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{train-microbatch: cannot tell how this op carries the batch}}
  %first = tensor.extract_slice %x[0, 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32>
  %el = tensor.empty() : tensor<2x4xf32>
  %zl = linalg.fill ins(%zero : f32) outs(%el : tensor<2x4xf32>) -> tensor<2x4xf32>
  %logits = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%first, %head : tensor<2x8xf32>, tensor<4x8xf32>) outs(%zl : tensor<2x4xf32>) -> tensor<2x4xf32>
  %l2 = tensor.extract_slice %labels[0] [2] [1] : tensor<4xi32> to tensor<2xi32>
  %loss = train.cross_entropy %logits, %l2 ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<2x4xf32>, tensor<2xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
