// Tests that every train op prints and parses back unchanged, in the custom
// and the generic form.
// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// CHECK-LABEL: func.func @embedding
func.func @embedding(%table: tensor<256x64xbf16>, %ids: tensor<4x32xi32>, %dx: tensor<4x32x64xbf16>)
    -> (tensor<4x32x64xbf16>, tensor<256x64xbf16>) {
  // CHECK: train.embedding %{{.+}}[%{{.+}}] : tensor<256x64xbf16>, tensor<4x32xi32> -> tensor<4x32x64xbf16>
  %x = train.embedding %table[%ids] : tensor<256x64xbf16>, tensor<4x32xi32> -> tensor<4x32x64xbf16>
  // CHECK: train.embedding_grad %{{.+}}[%{{.+}}] : tensor<4x32x64xbf16>, tensor<4x32xi32> -> tensor<256x64xbf16>
  %dt = train.embedding_grad %dx[%ids] : tensor<4x32x64xbf16>, tensor<4x32xi32> -> tensor<256x64xbf16>
  return %x, %dt : tensor<4x32x64xbf16>, tensor<256x64xbf16>
}

// CHECK-LABEL: func.func @norm_and_rope
func.func @norm_and_rope(%x: tensor<4x32x8x16xf32>, %w: tensor<16xf32>) -> (tensor<4x32x8x16xf32>, tensor<4x32x8x16xf32>) {
  // CHECK: train.rms_norm %{{.+}}, %{{.+}} eps = 1.000000e-05 : tensor<4x32x8x16xf32>, tensor<16xf32>
  %n = train.rms_norm %x, %w eps = 1.0e-5 : tensor<4x32x8x16xf32>, tensor<16xf32>
  // CHECK: train.rope %{{.+}} theta = 5.000000e+05 : tensor<4x32x8x16xf32>
  %r = train.rope %n theta = 500000.0 : tensor<4x32x8x16xf32>
  // CHECK: train.rope %{{.+}} theta = 5.000000e+05 inverse : tensor<4x32x8x16xf32>
  %i = train.rope %r theta = 500000.0 inverse : tensor<4x32x8x16xf32>
  return %n, %i : tensor<4x32x8x16xf32>, tensor<4x32x8x16xf32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x16x8x4xf32>, %k: tensor<2x16x2x4xf32>, %v: tensor<2x16x2x4xf32>, %do: tensor<2x16x8x4xf32>)
    -> (tensor<2x16x8x4xf32>, tensor<2x16x8x4xf32>, tensor<2x16x8x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>) {
  // CHECK: train.attention %{{.+}}, %{{.+}}, %{{.+}} causal scale = 5.000000e-01 : tensor<2x16x8x4xf32>, tensor<2x16x2x4xf32>
  %o = train.attention %q, %k, %v causal scale = 0.5 : tensor<2x16x8x4xf32>, tensor<2x16x2x4xf32>
  // CHECK: train.attention %{{.+}}, %{{.+}}, %{{.+}} scale = 2.500000e-01 : tensor<2x16x8x4xf32>, tensor<2x16x2x4xf32>
  %o2 = train.attention %q, %k, %v scale = 0.25 : tensor<2x16x8x4xf32>, tensor<2x16x2x4xf32>
  // CHECK: train.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} causal scale = 5.000000e-01 : tensor<2x16x8x4xf32>, tensor<2x16x2x4xf32>
  %dq, %dk, %dv = train.attention_grad %q, %k, %v, %do causal scale = 0.5 : tensor<2x16x8x4xf32>, tensor<2x16x2x4xf32>
  return %o, %o2, %dq, %dk, %dv : tensor<2x16x8x4xf32>, tensor<2x16x8x4xf32>, tensor<2x16x8x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>
}

// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%logits: tensor<128x256xf32>, %labels: tensor<128xi32>, %dl: tensor<f32>, %dv: tensor<128xf32>)
    -> (tensor<f32>, tensor<f32>, tensor<128xf32>, tensor<128x256xf32>, tensor<128x256xf32>) {
  // CHECK: train.cross_entropy %{{.+}}, %{{.+}} ignore_index = -100 reduction = <mean> label_smoothing = 0.000000e+00 z_loss = 0.000000e+00 : tensor<128x256xf32>, tensor<128xi32> -> tensor<f32>
  %mean = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<128x256xf32>, tensor<128xi32> -> tensor<f32>
  // CHECK: reduction = <sum> label_smoothing = 1.000000e-01 z_loss = 1.000000e-04
  %sum = train.cross_entropy %logits, %labels ignore_index = 0 reduction = <sum> label_smoothing = 0.1 z_loss = 1.0e-4 : tensor<128x256xf32>, tensor<128xi32> -> tensor<f32>
  // CHECK: reduction = <none>{{.*}}-> tensor<128xf32>
  %none = train.cross_entropy %logits, %labels ignore_index = -1 reduction = <none> label_smoothing = 0.0 z_loss = 0.0 : tensor<128x256xf32>, tensor<128xi32> -> tensor<128xf32>
  // CHECK: train.cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}} ignore_index = -100 reduction = <mean>
  %g = train.cross_entropy_grad %logits, %labels, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<128x256xf32>, tensor<128xi32>, tensor<f32>
  // CHECK: train.cross_entropy_grad {{.*}}reduction = <none>{{.*}}tensor<128xf32>
  %g2 = train.cross_entropy_grad %logits, %labels, %dv ignore_index = -100 reduction = <none> label_smoothing = 0.0 z_loss = 0.0 : tensor<128x256xf32>, tensor<128xi32>, tensor<128xf32>
  return %mean, %sum, %none, %g, %g2 : tensor<f32>, tensor<f32>, tensor<128xf32>, tensor<128x256xf32>, tensor<128x256xf32>
}

// CHECK-LABEL: func.func @linear_cross_entropy
func.func @linear_cross_entropy(%h: tensor<128x64xbf16>, %w: tensor<256x64xbf16>, %labels: tensor<128xi32>, %dl: tensor<f32>)
    -> (tensor<f32>, tensor<128xf32>, tensor<128x64xbf16>, tensor<256x64xbf16>) {
  // CHECK: %[[LOSS:.+]], %[[LSE:.+]] = train.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} ignore_index = -100 reduction = <mean> label_smoothing = 1.000000e-01 z_loss = 1.000000e-04 softcap = 3.000000e+01 chunk_tokens = 32 : tensor<128x64xbf16>, tensor<256x64xbf16>, tensor<128xi32> -> tensor<f32>, tensor<128xf32>
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.1 z_loss = 1.0e-4 softcap = 30.0 chunk_tokens = 32 : tensor<128x64xbf16>, tensor<256x64xbf16>, tensor<128xi32> -> tensor<f32>, tensor<128xf32>
  // CHECK: train.linear_cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}}, %[[LSE]], %{{.+}} ignore_index = -100 reduction = <mean> {{.*}} chunk_tokens = 32 : tensor<128x64xbf16>, tensor<256x64xbf16>, tensor<128xi32>, tensor<128xf32>, tensor<f32>
  %dh, %dw = train.linear_cross_entropy_grad %h, %w, %labels, %lse, %dl ignore_index = -100 reduction = <mean> label_smoothing = 0.1 z_loss = 1.0e-4 softcap = 30.0 chunk_tokens = 32 : tensor<128x64xbf16>, tensor<256x64xbf16>, tensor<128xi32>, tensor<128xf32>, tensor<f32>
  return %loss, %lse, %dh, %dw : tensor<f32>, tensor<128xf32>, tensor<128x64xbf16>, tensor<256x64xbf16>
}

// CHECK-LABEL: func.func @linear_cross_entropy_bias
func.func @linear_cross_entropy_bias(%h: tensor<128x64xf32>, %w: tensor<256x64xf32>, %b: tensor<256xf32>, %labels: tensor<128xi32>, %dl: tensor<128xf32>)
    -> (tensor<128xf32>, tensor<256xf32>) {
  // CHECK: train.linear_cross_entropy %{{.+}}, %{{.+}} bias %{{.+}}, %{{.+}} ignore_index = -100 reduction = <none> {{.*}} chunk_tokens = 32 chunk_vocab = 64 : tensor<128x64xf32>, tensor<256x64xf32>, tensor<128xi32>, tensor<256xf32> -> tensor<128xf32>, tensor<128xf32>
  %loss, %lse = train.linear_cross_entropy %h, %w bias %b, %labels ignore_index = -100 reduction = <none> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 32 chunk_vocab = 64 : tensor<128x64xf32>, tensor<256x64xf32>, tensor<128xi32>, tensor<256xf32> -> tensor<128xf32>, tensor<128xf32>
  // CHECK: train.linear_cross_entropy_grad %{{.+}}, %{{.+}} bias %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {{.*}} : tensor<128x64xf32>, tensor<256x64xf32>, tensor<128xi32>, tensor<128xf32>, tensor<128xf32>, tensor<256xf32> -> tensor<256xf32>
  %dh, %dw, %db = train.linear_cross_entropy_grad %h, %w bias %b, %labels, %lse, %dl ignore_index = -100 reduction = <none> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 32 : tensor<128x64xf32>, tensor<256x64xf32>, tensor<128xi32>, tensor<128xf32>, tensor<128xf32>, tensor<256xf32> -> tensor<256xf32>
  return %loss, %db : tensor<128xf32>, tensor<256xf32>
}
