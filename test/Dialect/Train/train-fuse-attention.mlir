// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(train-fuse-attention))' --split-input-file | FileCheck %s

// The forward becomes the fused kernel (output and log-sum-exp); the
// gradient on the same inputs takes both, with a delta workspace.
// CHECK-LABEL: func.func @pair
// CHECK-DAG: %[[B:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[S:.*]] = arith.constant 32 : i64
// CHECK-DAG: %[[H:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[KVH:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[D:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[CAUSAL:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[SCALE:.*]] = arith.constant 2.500000e-01 : f32
// CHECK: %[[F:.*]]:2 = train.call_kernel @loomrt_attention_f32(%[[B]], %[[S]], %[[H]], %[[KVH]], %[[D]], %[[CAUSAL]], %[[SCALE]] : i64, i64, i64, i64, i64, i32, f32) ins(%arg0, %arg1, %arg2 : tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>, tensor<4x32x2x16xf32>) outs(%{{.*}}, %{{.*}} : tensor<4x32x8x16xf32>, tensor<4x8x32xf32>) -> tensor<4x32x8x16xf32>, tensor<4x8x32xf32>
// CHECK: %[[G:.*]]:4 = train.call_kernel @loomrt_attention_grad_f32({{.*}}) ins(%arg0, %arg1, %arg2, %[[F]]#0, %[[F]]#1, %arg3 : {{.*}}) outs({{.*}} : tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>, tensor<4x32x2x16xf32>, tensor<4x8x32xf32>)
// CHECK: return %[[F]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2
// CHECK-NOT: train.attention
func.func @pair(%q: tensor<4x32x8x16xf32>, %k: tensor<4x32x2x16xf32>, %v: tensor<4x32x2x16xf32>, %do: tensor<4x32x8x16xf32>)
    -> (tensor<4x32x8x16xf32>, tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>, tensor<4x32x2x16xf32>) {
  %o = train.attention %q, %k, %v causal scale = 0.25 : tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>
  %dq, %dk, %dv = train.attention_grad %q, %k, %v, %do causal scale = 0.25 : tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>
  return %o, %dq, %dk, %dv : tensor<4x32x8x16xf32>, tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>, tensor<4x32x2x16xf32>
}

// -----

// Left alone: f64, a key length other than the query's, and a gradient with
// another scale than its forward's (that forward is still fused).
// CHECK-LABEL: func.func @left_alone
// CHECK: train.attention %arg0
// CHECK: train.attention %arg2
// CHECK: train.call_kernel @loomrt_attention_f32
// CHECK-NOT: train.call_kernel
// CHECK: train.attention_grad
func.func @left_alone(%q64: tensor<1x8x2x4xf64>, %k64: tensor<1x8x2x4xf64>,
                      %q: tensor<1x8x2x4xf32>, %k: tensor<1x16x2x4xf32>,
                      %k8: tensor<1x8x2x4xf32>, %do: tensor<1x8x2x4xf32>)
    -> (tensor<1x8x2x4xf64>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>) {
  %a = train.attention %q64, %k64, %k64 causal scale = 0.5 : tensor<1x8x2x4xf64>, tensor<1x8x2x4xf64>
  %b = train.attention %q, %k, %k scale = 0.5 : tensor<1x8x2x4xf32>, tensor<1x16x2x4xf32>
  %c = train.attention %q, %k8, %k8 causal scale = 0.5 : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
  %dq, %dk, %dv = train.attention_grad %q, %k8, %k8, %do causal scale = 0.25 : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
  return %a, %b, %c, %dq : tensor<1x8x2x4xf64>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
}

// -----

// bf16 with a head dim that is a multiple of 8: the bf16 kernels (tensor
// cores on the CUDA target) take the operands as they are; the log-sum-exp
// and the backward's workspace are f32.
// CHECK-LABEL: func.func @bf16
// CHECK-NOT: arith.extf
// CHECK: %[[F:.*]]:2 = train.call_kernel @loomrt_attention_bf16({{.*}}) ins(%arg0, %arg1, %arg2 : tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>) outs({{.*}}) -> tensor<2x16x4x8xbf16>, tensor<2x4x16xf32>
// CHECK: %[[G:.*]]:4 = train.call_kernel @loomrt_attention_grad_bf16({{.*}}) ins(%arg0, %arg1, %arg2, %[[F]]#0, %[[F]]#1, %arg3 : {{.*}}) outs({{.*}}) -> tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x4x16xf32>
// CHECK-NOT: arith.truncf
// CHECK: return %[[F]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2
func.func @bf16(%q: tensor<2x16x4x8xbf16>, %k: tensor<2x16x4x8xbf16>, %v: tensor<2x16x4x8xbf16>, %do: tensor<2x16x4x8xbf16>)
    -> (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>) {
  %o = train.attention %q, %k, %v scale = 0.35 : tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>
  %dq, %dk, %dv = train.attention_grad %q, %k, %v, %do scale = 0.35 : tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>
  return %o, %dq, %dk, %dv : tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>
}

// -----

// bf16: the kernels are f32, so each call's operands are widened (the
// gradient widens its own copies, and the bf16 output) and the results
// rounded back; the log-sum-exp stays f32.
// CHECK-LABEL: func.func @bf16_dim4
// CHECK-COUNT-3: arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[F:.*]]:2 = train.call_kernel @loomrt_attention_f32({{.*}}) ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x16x4x4xf32>, tensor<2x16x4x4xf32>, tensor<2x16x4x4xf32>) outs({{.*}}) -> tensor<2x16x4x4xf32>, tensor<2x4x16xf32>
// CHECK: %[[O:.*]] = linalg.generic {{.*}} ins(%[[F]]#0 : tensor<2x16x4x4xf32>) outs(%{{.*}} : tensor<2x16x4x4xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK-COUNT-3: arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[OW:.*]] = linalg.generic {{.*}} ins(%[[O]] : tensor<2x16x4x4xbf16>) outs(%{{.*}} : tensor<2x16x4x4xf32>)
// CHECK: %[[DO:.*]] = linalg.generic {{.*}} ins(%arg3 : tensor<2x16x4x4xbf16>) outs(%{{.*}} : tensor<2x16x4x4xf32>)
// CHECK: %[[G:.*]]:4 = train.call_kernel @loomrt_attention_grad_f32({{.*}}) ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[OW]], %[[F]]#1, %[[DO]] : {{.*}}) outs({{.*}}) -> tensor<2x16x4x4xf32>, tensor<2x16x4x4xf32>, tensor<2x16x4x4xf32>, tensor<2x4x16xf32>
// CHECK-COUNT-3: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[O]]
func.func @bf16_dim4(%q: tensor<2x16x4x4xbf16>, %k: tensor<2x16x4x4xbf16>, %v: tensor<2x16x4x4xbf16>, %do: tensor<2x16x4x4xbf16>)
    -> (tensor<2x16x4x4xbf16>, tensor<2x16x4x4xbf16>, tensor<2x16x4x4xbf16>, tensor<2x16x4x4xbf16>) {
  %o = train.attention %q, %k, %v scale = 0.35 : tensor<2x16x4x4xbf16>, tensor<2x16x4x4xbf16>
  %dq, %dk, %dv = train.attention_grad %q, %k, %v, %do scale = 0.35 : tensor<2x16x4x4xbf16>, tensor<2x16x4x4xbf16>
  return %o, %dq, %dk, %dv : tensor<2x16x4x4xbf16>, tensor<2x16x4x4xbf16>, tensor<2x16x4x4xbf16>, tensor<2x16x4x4xbf16>
}

// -----

// f16 (widened), with the query also the key and value: the gradient reads
// it three times and is fused once.
// CHECK-LABEL: func.func @f16
// CHECK-COUNT-3: arith.extf %{{.*}} : f16 to f32
// CHECK: train.call_kernel @loomrt_attention_f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: train.call_kernel @loomrt_attention_grad_f32
// CHECK-COUNT-3: arith.truncf %{{.*}} : f32 to f16
func.func @f16(%q: tensor<1x16x2x8xf16>, %do: tensor<1x16x2x8xf16>)
    -> (tensor<1x16x2x8xf16>, tensor<1x16x2x8xf16>, tensor<1x16x2x8xf16>, tensor<1x16x2x8xf16>) {
  %o = train.attention %q, %q, %q causal scale = 0.35 : tensor<1x16x2x8xf16>, tensor<1x16x2x8xf16>
  %dq, %dk, %dv = train.attention_grad %q, %q, %q, %do causal scale = 0.35 : tensor<1x16x2x8xf16>, tensor<1x16x2x8xf16>
  return %o, %dq, %dk, %dv : tensor<1x16x2x8xf16>, tensor<1x16x2x8xf16>, tensor<1x16x2x8xf16>, tensor<1x16x2x8xf16>
}

// -----

// A gradient whose key and value are the forward's query but whose query is
// another tensor is not the forward's: it stays.
// CHECK-LABEL: func.func @other_query
// CHECK: train.call_kernel @loomrt_attention_f32
// CHECK-NOT: train.call_kernel
// CHECK: train.attention_grad %arg1, %arg0, %arg0, %arg2
func.func @other_query(%q: tensor<1x16x2x8xf32>, %x: tensor<1x16x2x8xf32>, %do: tensor<1x16x2x8xf32>)
    -> (tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>) {
  %o = train.attention %q, %q, %q scale = 0.35 : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
  %dq, %dk, %dv = train.attention_grad %x, %q, %q, %do scale = 0.35 : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
  return %o, %dq : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
}

// -----

// A gradient whose query is a recomputation of the forward's (the same
// rope of the same matmul, as train-remat clones them) is the forward's:
// it takes the forward's log-sum-exp. One whose recomputation differs (the
// rope's theta) is not.
// CHECK-LABEL: func.func @recomputed_query
// CHECK: %[[F:.*]]:2 = train.call_kernel @loomrt_attention_f32
// CHECK: %[[Q2:.*]] = train.rope
// CHECK: train.call_kernel @loomrt_attention_grad_f32({{.*}}) ins(%[[Q2]], %arg1, %arg1, %[[F]]#0, %[[F]]#1, %arg2 :
// CHECK: %[[Q3:.*]] = train.rope {{.*}} theta = 5.000000e+02
// CHECK: train.attention_grad %[[Q3]], %arg1, %arg1, %arg2
func.func @recomputed_query(%x: tensor<16x16xf32>, %k: tensor<1x16x2x8xf32>, %do: tensor<1x16x2x8xf32>)
    -> (tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %h = linalg.matmul ins(%x, %x : tensor<16x16xf32>, tensor<16x16xf32>) outs(%f : tensor<16x16xf32>) -> tensor<16x16xf32>
  %hq = tensor.expand_shape %h [[0, 1], [2, 3]] output_shape [1, 16, 2, 8] : tensor<16x16xf32> into tensor<1x16x2x8xf32>
  %q = train.rope %hq theta = 1.0e4 : tensor<1x16x2x8xf32>
  %o = train.attention %q, %k, %k scale = 0.35 : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
  // The recomputation, with a fill of its own.
  %f2 = linalg.fill ins(%z : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %h2 = linalg.matmul ins(%x, %x : tensor<16x16xf32>, tensor<16x16xf32>) outs(%f2 : tensor<16x16xf32>) -> tensor<16x16xf32>
  %hq2 = tensor.expand_shape %h2 [[0, 1], [2, 3]] output_shape [1, 16, 2, 8] : tensor<16x16xf32> into tensor<1x16x2x8xf32>
  %q2 = train.rope %hq2 theta = 1.0e4 : tensor<1x16x2x8xf32>
  %dq, %dk, %dv = train.attention_grad %q2, %k, %k, %do scale = 0.35 : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
  %q3 = train.rope %hq2 theta = 5.0e2 : tensor<1x16x2x8xf32>
  %dq3, %dk3, %dv3 = train.attention_grad %q3, %k, %k, %do scale = 0.35 : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
  return %o, %dq, %dq3 : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
}

// -----

// A forward that train-remat recomputed in the backward: the gradient pairs
// with the recomputation (the nearest forward on the same inputs), not with
// the original, whose output the backward no longer keeps.
// CHECK-LABEL: func.func @recomputed_forward
// CHECK: train.call_kernel @loomrt_attention_f32
// CHECK: %[[F2:.*]]:2 = train.call_kernel @loomrt_attention_f32
// CHECK: train.call_kernel @loomrt_attention_grad_f32({{.*}}) ins(%arg0, %arg1, %arg1, %[[F2]]#0, %[[F2]]#1, %arg2 :
func.func @recomputed_forward(%q: tensor<1x16x2x8xf32>, %k: tensor<1x16x2x8xf32>, %do: tensor<1x16x2x8xf32>)
    -> (tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>) {
  %o = train.attention %q, %k, %k scale = 0.35 : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
  %o2 = train.attention %q, %k, %k scale = 0.35 : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
  %dq, %dk, %dv = train.attention_grad %q, %k, %k, %do scale = 0.35 : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
  return %o, %o2, %dq : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>
}
