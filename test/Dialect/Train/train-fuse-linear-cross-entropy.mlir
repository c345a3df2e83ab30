// Tests train-fuse-linear-cross-entropy: the projection + loss pair becomes
// train.linear_cross_entropy in a forward and in a training step (where the
// backward's logits chain becomes one gradient op); anything else is left
// alone, with a remark saying why.
// RUN: loom-opt %s -split-input-file -verify-diagnostics -train-fuse-linear-cross-entropy="chunk-tokens=16 remarks=true" | FileCheck %s
// RUN: loom-opt %s -split-input-file -train-fuse-linear-cross-entropy="chunk-tokens=16 chunk-vocab=32" | FileCheck %s --check-prefix=VOCAB
// VOCAB-LABEL: func.func @forward
// VOCAB: train.linear_cross_entropy {{.*}} chunk_tokens = 16 chunk_vocab = 32 :

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>

// The forward form.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[H:.+]]: tensor<32x8xf32>, %[[W:.+]]: tensor<64x8xf32>, %[[Y:.+]]: tensor<32xi32>)
// CHECK: %[[LOSS:.+]], %{{.+}} = train.linear_cross_entropy %[[H]], %[[W]], %[[Y]] ignore_index = -100 reduction = <mean> label_smoothing = 1.000000e-01 z_loss = 1.000000e-04 softcap = 0.000000e+00 chunk_tokens = 16 : tensor<32x8xf32>, tensor<64x8xf32>, tensor<32xi32> -> tensor<f32>, tensor<32xf32>
// CHECK-NOT: linalg.matmul
// CHECK-NOT: train.cross_entropy
// CHECK: return %[[LOSS]]
func.func @forward(%h: tensor<32x8xf32>, %w: tensor<64x8xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%h, %w : tensor<32x8xf32>, tensor<64x8xf32>) outs(%z : tensor<32x64xf32>) -> tensor<32x64xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.1 z_loss = 1.0e-4 : tensor<32x64xf32>, tensor<32xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>

// The training-step form (as train-autodiff emits it): the loss gradient and
// the two contractions of its result become one linear_cross_entropy_grad
// reading the forward's log-sum-exp. The weight gradient accumulated into
// an earlier one (a tied embedding's) becomes an add.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[H:.+]]: tensor<32x8xf32>, %[[W:.+]]: tensor<64x8xf32>, %[[Y:.+]]: tensor<32xi32>, %[[DE:.+]]: tensor<64x8xf32>)
// CHECK: %[[LOSS:.+]], %[[LSE:.+]] = train.linear_cross_entropy %[[H]], %[[W]], %[[Y]]
// CHECK: %[[DH:.+]], %[[DW:.+]] = train.linear_cross_entropy_grad %[[H]], %[[W]], %[[Y]], %[[LSE]], %{{.+}} ignore_index = -100 reduction = <sum>
// CHECK: %[[SUM:.+]] = linalg.add ins(%[[DE]], %[[DW]] : tensor<64x8xf32>, tensor<64x8xf32>)
// CHECK-NOT: train.cross_entropy
// CHECK: return %[[LOSS]], %[[DH]], %[[SUM]]
func.func @step(%h: tensor<32x8xf32>, %w: tensor<64x8xf32>, %labels: tensor<32xi32>, %dembed: tensor<64x8xf32>)
    -> (tensor<f32>, tensor<32x8xf32>, tensor<64x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%h, %w : tensor<32x8xf32>, tensor<64x8xf32>) outs(%z : tensor<32x64xf32>) -> tensor<32x64xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <sum> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32> -> tensor<f32>
  %e0 = tensor.empty() : tensor<f32>
  %dl = linalg.fill ins(%one : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %dlogits = train.cross_entropy_grad %logits, %labels, %dl ignore_index = -100 reduction = <sum> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32>, tensor<f32>
  %eh = tensor.empty() : tensor<32x8xf32>
  %zh = linalg.fill ins(%zero : f32) outs(%eh : tensor<32x8xf32>) -> tensor<32x8xf32>
  %dh = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, n)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, k)>],
                        iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dlogits, %w : tensor<32x64xf32>, tensor<64x8xf32>) outs(%zh : tensor<32x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<32x8xf32>
  %dw = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, n)>, affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>],
                        iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%dlogits, %h : tensor<32x64xf32>, tensor<32x8xf32>) outs(%dembed : tensor<64x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<64x8xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<32x8xf32>, tensor<64x8xf32>
}

// -----

// bf16: the fused loss computes in f32; its loss is truncated back to the
// step's bf16, and the bf16 loss gradient extended to f32.
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @bf16_step
// CHECK: %[[LOSS:.+]], %[[LSE:.+]] = train.linear_cross_entropy {{.*}} : tensor<32x8xbf16>, tensor<64x8xbf16>, tensor<32xi32> -> tensor<f32>, tensor<32xf32>
// CHECK: %[[L16:.+]] = linalg.generic {{.*}} ins(%[[LOSS]] : tensor<f32>)
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: %[[DL32:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<bf16>)
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK: %[[DH:.+]], %[[DW:.+]] = train.linear_cross_entropy_grad {{.*}}, %[[LSE]], %[[DL32]] {{.*}} : tensor<32x8xbf16>, tensor<64x8xbf16>, tensor<32xi32>, tensor<32xf32>, tensor<f32>
// CHECK: return %[[L16]], %[[DH]]
func.func @bf16_step(%h: tensor<32x8xbf16>, %w: tensor<64x8xbf16>, %labels: tensor<32xi32>, %dl: tensor<bf16>)
    -> (tensor<bf16>, tensor<32x8xbf16>) {
  %zero = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<32x64xbf16>
  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<32x64xbf16>) -> tensor<32x64xbf16>
  %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%h, %w : tensor<32x8xbf16>, tensor<64x8xbf16>) outs(%z : tensor<32x64xbf16>) -> tensor<32x64xbf16>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xbf16>, tensor<32xi32> -> tensor<bf16>
  %dlogits = train.cross_entropy_grad %logits, %labels, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xbf16>, tensor<32xi32>, tensor<bf16>
  %eh = tensor.empty() : tensor<32x8xbf16>
  %zh = linalg.fill ins(%zero : bf16) outs(%eh : tensor<32x8xbf16>) -> tensor<32x8xbf16>
  %dh = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, n)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, k)>],
                        iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dlogits, %w : tensor<32x64xbf16>, tensor<64x8xbf16>) outs(%zh : tensor<32x8xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %c: bf16):
    %p = arith.mulf %a, %b : bf16
    %s = arith.addf %c, %p : bf16
    linalg.yield %s : bf16
  } -> tensor<32x8xbf16>
  return %loss, %dh : tensor<bf16>, tensor<32x8xbf16>
}

// -----

// Mixed precision (loom.models.llama's bf16 models): bf16 operands, f32
// logits and loss. The fused op takes the bf16 operands and computes in
// f32, as the matmul did.
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @mixed
// CHECK: %[[LOSS:.+]], %{{.+}} = train.linear_cross_entropy {{.*}} : tensor<32x8xbf16>, tensor<64x8xbf16>, tensor<32xi32> -> tensor<f32>, tensor<32xf32>
// CHECK-NOT: linalg.matmul
// CHECK: return %[[LOSS]]
func.func @mixed(%h: tensor<32x8xbf16>, %w: tensor<64x8xbf16>, %labels: tensor<32xi32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%h, %w : tensor<32x8xbf16>, tensor<64x8xbf16>) outs(%z : tensor<32x64xf32>) -> tensor<32x64xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A bias broadcast over the tokens as the projection's init: the fused op
// takes it, and its gradient (the sum over tokens) comes from the fused
// gradient op.
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @bias_step
// CHECK-SAME: (%[[H:.+]]: tensor<32x8xf32>, %[[W:.+]]: tensor<64x8xf32>, %[[B:.+]]: tensor<64xf32>, %[[Y:.+]]: tensor<32xi32>, %[[DL:.+]]: tensor<f32>)
// CHECK: %[[LOSS:.+]], %[[LSE:.+]] = train.linear_cross_entropy %[[H]], %[[W]] bias %[[B]], %[[Y]]
// CHECK: %[[DH:.+]], %[[DW:.+]], %[[DB:.+]] = train.linear_cross_entropy_grad %[[H]], %[[W]] bias %[[B]], %[[Y]], %[[LSE]], %[[DL]]
// CHECK: return %[[LOSS]], %[[DB]]
func.func @bias_step(%h: tensor<32x8xf32>, %w: tensor<64x8xf32>, %b: tensor<64xf32>, %labels: tensor<32xi32>, %dl: tensor<f32>)
    -> (tensor<f32>, tensor<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %bb = linalg.broadcast ins(%b : tensor<64xf32>) outs(%e : tensor<32x64xf32>) dimensions = [0]
  %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%h, %w : tensor<32x8xf32>, tensor<64x8xf32>) outs(%bb : tensor<32x64xf32>) -> tensor<32x64xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32> -> tensor<f32>
  %dlogits = train.cross_entropy_grad %logits, %labels, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32>, tensor<f32>
  %eb = tensor.empty() : tensor<64xf32>
  %zb = linalg.fill ins(%zero : f32) outs(%eb : tensor<64xf32>) -> tensor<64xf32>
  %db = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (n)>],
                        iterator_types = ["reduction", "parallel"]}
      ins(%dlogits : tensor<32x64xf32>) outs(%zb : tensor<64xf32>) {
  ^bb0(%a: f32, %c: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %loss, %db : tensor<f32>, tensor<64xf32>
}

// -----

// No match: each case keeps its cross-entropy, with the reason.
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>

// CHECK-LABEL: func.func @logits_argument
// CHECK: train.cross_entropy
func.func @logits_argument(%logits: tensor<32x64xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  // expected-remark @+1 {{not fused: the logits are not a linalg.matmul on tensors}}
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @weight_hidden_by_vocab
// CHECK: linalg.matmul
// CHECK: train.cross_entropy
func.func @weight_hidden_by_vocab(%h: tensor<32x8xf32>, %w: tensor<8x64xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %logits = linalg.matmul ins(%h, %w : tensor<32x8xf32>, tensor<8x64xf32>) outs(%z : tensor<32x64xf32>) -> tensor<32x64xf32>
  // expected-remark @+1 {{not fused: the projection's weight is not [vocab, hidden]}}
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @logits_returned
// CHECK: train.cross_entropy
func.func @logits_returned(%h: tensor<32x8xf32>, %w: tensor<64x8xf32>, %labels: tensor<32xi32>) -> (tensor<f32>, tensor<32x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%h, %w : tensor<32x8xf32>, tensor<64x8xf32>) outs(%z : tensor<32x64xf32>) -> tensor<32x64xf32>
  // expected-remark @+1 {{not fused: the logits have another use than the loss and its gradient}}
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32> -> tensor<f32>
  return %loss, %logits : tensor<f32>, tensor<32x64xf32>
}

// CHECK-LABEL: func.func @accumulating_projection
// CHECK: train.cross_entropy
func.func @accumulating_projection(%h: tensor<32x8xf32>, %w: tensor<64x8xf32>, %bias: tensor<32x64xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%h, %w : tensor<32x8xf32>, tensor<64x8xf32>) outs(%bias : tensor<32x64xf32>) -> tensor<32x64xf32>
  // expected-remark @+1 {{not fused: the projection accumulates into something other than zeros or a bias broadcast over the tokens}}
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @one_chunk
// CHECK: train.cross_entropy
func.func @one_chunk(%h: tensor<16x8xf32>, %w: tensor<64x8xf32>, %labels: tensor<16xi32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%h, %w : tensor<16x8xf32>, tensor<64x8xf32>) outs(%z : tensor<16x64xf32>) -> tensor<16x64xf32>
  // expected-remark @+1 {{not fused: one chunk of 16 tokens would hold all the logits (nothing to save)}}
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<16x64xf32>, tensor<16xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// A backward that is not the expected chain: the logits' gradient is also
// returned.
// CHECK-LABEL: func.func @gradient_returned
// CHECK: train.cross_entropy_grad
func.func @gradient_returned(%h: tensor<32x8xf32>, %w: tensor<64x8xf32>, %labels: tensor<32xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<32x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%h, %w : tensor<32x8xf32>, tensor<64x8xf32>) outs(%z : tensor<32x64xf32>) -> tensor<32x64xf32>
  // expected-remark @+1 {{not fused: the logits' gradient is used by something other than the dhidden, dweight and dbias reductions}}
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32> -> tensor<f32>
  %g = train.cross_entropy_grad %logits, %labels, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<32x64xf32>, tensor<32xi32>, tensor<f32>
  return %loss, %g : tensor<f32>, tensor<32x64xf32>
}
