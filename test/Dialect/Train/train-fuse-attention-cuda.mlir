// train-fuse-attention{cuda}: attention outside the CUDA kernels' domain
// (head dims up to 128, multiples of 4 in f32 and of 8 in bf16; batch x
// heads up to 65535) is left to train-decompose, and every fallback is a
// remark: verify-diagnostics fails on one too many or too few.
// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(train-fuse-attention{cuda=true}))' | FileCheck %s
// On the CPU the host kernels take any head dim: two remarks only.
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(train-fuse-attention))' 2>/dev/null | FileCheck %s --check-prefix=CPU
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(train-fuse-attention))' 2>&1 >/dev/null | FileCheck %s --check-prefix=CPU-REMARK --implicit-check-not='remark: train-fuse-attention'
// CPU-REMARK: remark: train-fuse-attention: the bf16 kernels take head dims that are multiples of 8, not 12; widened to f32 around the calls
// CPU-REMARK: remark: train-fuse-attention: the kernels take equal query and key lengths; left to train-decompose

// CHECK-LABEL: func.func @dim_132
// CHECK: train.attention
// CHECK-NOT: train.call_kernel
// CPU-LABEL: func.func @dim_132
// CPU: train.call_kernel @loomrt_attention_f32
func.func @dim_132(%q: tensor<1x16x2x132xf32>) -> tensor<1x16x2x132xf32> {
  // expected-remark @+1 {{train-fuse-attention: head dim 132 is outside the CUDA kernels' (at most 128, a multiple of 4 in f32); left to train-decompose}}
  %o = train.attention %q, %q, %q causal scale = 0.087 : tensor<1x16x2x132xf32>, tensor<1x16x2x132xf32>
  return %o : tensor<1x16x2x132xf32>
}

// -----

// CHECK-LABEL: func.func @dim_6
// CHECK-NOT: train.call_kernel
// CPU-LABEL: func.func @dim_6
// CPU: train.call_kernel @loomrt_attention_f32
func.func @dim_6(%q: tensor<1x16x2x6xf32>) -> tensor<1x16x2x6xf32> {
  // expected-remark @+1 {{head dim 6 is outside the CUDA kernels' (at most 128, a multiple of 4 in f32)}}
  %o = train.attention %q, %q, %q scale = 0.4 : tensor<1x16x2x6xf32>, tensor<1x16x2x6xf32>
  return %o : tensor<1x16x2x6xf32>
}

// -----

// bf16 with head dim 12: not the bf16 kernels', but the f32 kernels' (12 is
// a multiple of 4), widened; a remark says so on both targets.
// CHECK-LABEL: func.func @bf16_dim_12
// CHECK: train.call_kernel @loomrt_attention_f32
func.func @bf16_dim_12(%q: tensor<1x16x2x12xbf16>) -> tensor<1x16x2x12xbf16> {
  // expected-remark @+1 {{train-fuse-attention: the bf16 kernels take head dims that are multiples of 8, not 12; widened to f32 around the calls}}
  %o = train.attention %q, %q, %q scale = 0.3 : tensor<1x16x2x12xbf16>, tensor<1x16x2x12xbf16>
  return %o : tensor<1x16x2x12xbf16>
}

// -----

// bf16 with head dim 136: a multiple of 8, over 128.
// CHECK-LABEL: func.func @bf16_dim_136
// CHECK-NOT: train.call_kernel
func.func @bf16_dim_136(%q: tensor<1x16x2x136xbf16>) -> tensor<1x16x2x136xbf16> {
  // expected-remark @+1 {{head dim 136 is outside the CUDA kernels' (at most 128, a multiple of 8 in bf16)}}
  %o = train.attention %q, %q, %q scale = 0.08 : tensor<1x16x2x136xbf16>, tensor<1x16x2x136xbf16>
  return %o : tensor<1x16x2x136xbf16>
}

// -----

// 2048 sequences x 64 heads: more (batch, head) blocks than the grid's 65535.
// CHECK-LABEL: func.func @grid
// CHECK-NOT: train.call_kernel
func.func @grid(%q: tensor<2048x4x64x16xf32>) -> tensor<2048x4x64x16xf32> {
  // expected-remark @+1 {{batch 2048 x 64 heads exceeds the CUDA kernels' grid (65535)}}
  %o = train.attention %q, %q, %q scale = 0.25 : tensor<2048x4x64x16xf32>, tensor<2048x4x64x16xf32>
  return %o : tensor<2048x4x64x16xf32>
}

// -----

// Query and key lengths differ: neither target's kernels take it.
// CHECK-LABEL: func.func @cross
// CHECK-NOT: train.call_kernel
func.func @cross(%q: tensor<1x8x2x16xf32>, %k: tensor<1x16x2x16xf32>) -> tensor<1x8x2x16xf32> {
  // expected-remark @+1 {{train-fuse-attention: the kernels take equal query and key lengths; left to train-decompose}}
  %o = train.attention %q, %k, %k scale = 0.25 : tensor<1x8x2x16xf32>, tensor<1x16x2x16xf32>
  return %o : tensor<1x8x2x16xf32>
}

// -----

// Inside the domain: fused, no remark.
// CHECK-LABEL: func.func @dim_128
// CHECK: train.call_kernel @loomrt_attention_f32
func.func @dim_128(%q: tensor<1x16x2x128xf32>) -> tensor<1x16x2x128xf32> {
  %o = train.attention %q, %q, %q scale = 0.088 : tensor<1x16x2x128xf32>, tensor<1x16x2x128xf32>
  return %o : tensor<1x16x2x128xf32>
}
