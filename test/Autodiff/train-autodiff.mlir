// Tests train-autodiff on small functions: the step's signature, the shape of
// each adjoint, and that the backward reads only the forward values it needs.
// Numerical checks of every rule are in test/Numerics/gradients.py.
// RUN: loom-opt %s -split-input-file -train-autodiff | FileCheck %s

// y = tanh(x W + b); loss = sum(y^2)
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[W:.+]]: tensor<3x4xf32> {train.param = "w"}, %[[B:.+]]: tensor<4xf32> {train.param = "b"}, %[[X:.+]]: tensor<2x3xf32> {train.input})
// CHECK-SAME: -> (tensor<f32> {train.loss}, tensor<3x4xf32> {train.grad = "w"}, tensor<4xf32> {train.grad = "b"})
func.func @mlp(%w: tensor<3x4xf32> {train.param = "w"}, %b: tensor<4xf32> {train.param = "b"},
               %x: tensor<2x3xf32> {train.input}) -> (tensor<f32> {train.loss}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  // The forward keeps its named op.
  // CHECK: %[[M:.+]] = linalg.matmul ins(%[[X]], %[[W]]
  %m = linalg.matmul ins(%x, %w : tensor<2x3xf32>, tensor<3x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<2x4xf32>, tensor<4xf32>) outs(%e : tensor<2x4xf32>) {
    ^bb0(%a: f32, %c: f32, %o: f32):
      %s = arith.addf %a, %c : f32
      %t = math.tanh %s : f32
      linalg.yield %t : f32
  } -> tensor<2x4xf32>
  %e0 = tensor.empty() : tensor<f32>
  %f0 = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%h : tensor<2x4xf32>) outs(%f0 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %sq = arith.mulf %in, %in : f32
      %r = arith.addf %sq, %acc : f32
      linalg.yield %r : f32
    }
  // d(sum y^2)/dy = 2 y, seeded with d loss = 1.
  // CHECK: %[[DY:.+]] = linalg.generic {{.*}} ins(%{{.+}}, %[[H:.+]] : tensor<f32>, tensor<2x4xf32>)
  // The bias adjoint sums over rows (a reduction over the broadcast dimension).
  // CHECK: %[[DB:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]{{.*}} ins(%[[DY]], %[[M]], %[[B]] :
  // CHECK: math.tanh
  // The weight adjoint is x^T dpre: it reads the input, never W itself.
  // CHECK: %[[DW:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel"]{{.*}} ins(%{{.+}}, %[[X]] : tensor<2x4xf32>, tensor<2x3xf32>)
  // CHECK: return %{{.+}}, %[[DW]], %[[DB]] : tensor<f32>, tensor<3x4xf32>, tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// A parameter the loss does not depend on gets a zero gradient; inputs get
// none.
// CHECK-LABEL: func.func @unused_param
// CHECK-SAME: -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "used"}, tensor<2xf32> {train.grad = "unused"})
func.func @unused_param(%used: tensor<4xf32> {train.param = "used"}, %unused: tensor<2xf32> {train.param = "unused"},
                        %x: tensor<4xf32> {train.input}) -> (tensor<f32> {train.loss}) {
  // CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
  // CHECK: %[[Z:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.+}} : tensor<2xf32>)
  // CHECK: return %{{.+}}, %{{.+}}, %[[Z]]
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %l = linalg.dot ins(%used, %x : tensor<4xf32>, tensor<4xf32>) outs(%f : tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Train ops become their gradient ops; a function without a loss is left alone.
// CHECK-LABEL: func.func @train_ops
func.func @train_ops(%table: tensor<16x8xf32> {train.param = "embed"}, %ids: tensor<2x4xi32> {train.input = "tokens"},
                     %labels: tensor<8xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  %x = train.embedding %table[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %l = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
  %loss = train.cross_entropy %l, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0
      : tensor<8x8xf32>, tensor<8xi32> -> tensor<f32>
  // CHECK: %[[DL:.+]] = train.cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}} ignore_index = -100 reduction = <mean>
  // CHECK: %[[DX:.+]] = tensor.expand_shape %[[DL]] {{\[\[}}0, 1], [2]] output_shape [2, 4, 8]
  // CHECK: %[[DT:.+]] = train.embedding_grad %[[DX]][%{{.+}}] : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<16x8xf32>
  // CHECK: return %{{.+}}, %[[DT]]
  return %loss : tensor<f32>
}

// The fused loss: one linear_cross_entropy_grad of its operands and the
// saved log-sum-exp (nothing tokens x vocab is saved).
// CHECK-LABEL: func.func @fused_loss
// CHECK-SAME: (%[[H:.+]]: tensor<8x4xf32> {train.param = "h"}, %[[W:.+]]: tensor<16x4xf32> {train.param = "w"}, %[[Y:.+]]: tensor<8xi32>
func.func @fused_loss(%h: tensor<8x4xf32> {train.param = "h"}, %w: tensor<16x4xf32> {train.param = "w"},
                      %labels: tensor<8xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  // CHECK: %[[LOSS:.+]], %[[LSE:.+]] = train.linear_cross_entropy %[[H]], %[[W]], %[[Y]]
  %loss, %lse = train.linear_cross_entropy %h, %w, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0
      z_loss = 0.0 softcap = 0.0 chunk_tokens = 4 : tensor<8x4xf32>, tensor<16x4xf32>, tensor<8xi32> -> tensor<f32>, tensor<8xf32>
  // CHECK: %[[DH:.+]], %[[DW:.+]] = train.linear_cross_entropy_grad %[[H]], %[[W]], %[[Y]], %[[LSE]], %{{.+}} ignore_index = -100 reduction = <mean> {{.*}} chunk_tokens = 4
  // CHECK: return %[[LOSS]], %[[DH]], %[[DW]]
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @no_loss
// CHECK-SAME: -> tensor<4xf32>
// CHECK-NOT: train.grad
func.func @no_loss(%w: tensor<4xf32> {train.param = "w"}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// Attention's VJP is one attention_grad of its operands (nothing seq x seq is
// saved); RMSNorm's is its decomposition, recomputed in the backward from
// the op's operands and differentiated.
// CHECK-LABEL: func.func @attention_and_norm
// CHECK-SAME: (%[[Q:.+]]: tensor<1x4x2x8xf32> {train.param = "q"}, %[[K:.+]]: tensor<1x4x1x8xf32> {train.param = "k"}, %[[W:.+]]: tensor<8xf32> {train.param = "w"})
func.func @attention_and_norm(%q: tensor<1x4x2x8xf32> {train.param = "q"}, %k: tensor<1x4x1x8xf32> {train.param = "k"},
                              %w: tensor<8xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  // CHECK: %[[O:.+]] = train.attention %[[Q]], %[[K]], %[[K]] causal scale = 3.500000e-01
  %o = train.attention %q, %k, %k causal scale = 0.35 : tensor<1x4x2x8xf32>, tensor<1x4x1x8xf32>
  // CHECK: train.rms_norm %[[O]], %[[W]]
  %n = train.rms_norm %o, %w eps = 1.0e-5 : tensor<1x4x2x8xf32>, tensor<8xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%n : tensor<1x4x2x8xf32>) outs(%f : tensor<f32>) dimensions = [0, 1, 2, 3]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  // The recomputed sum of squares of the norm's input, then its adjoint.
  // CHECK: linalg.generic {{.*}}ins(%[[O]] : tensor<1x4x2x8xf32>)
  // CHECK: math.rsqrt
  // CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = train.attention_grad %[[Q]], %[[K]], %[[K]], %{{.+}} causal scale = 3.500000e-01
  // k is both key and value: its gradients add up.
  // CHECK: %[[DKV:.+]] = linalg.generic {{.*}} ins(%[[DK]], %[[DV]] : tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>)
  // CHECK: arith.addf
  // CHECK: return %{{.+}}, %[[DQ]], %[[DKV]], %{{.+}} : tensor<f32>, tensor<1x4x2x8xf32>, tensor<1x4x1x8xf32>, tensor<8xf32>
  return %l : tensor<f32>
}

// -----

// train.rope is a rotation: its gradient is the inverse rotation of the
// result's gradient, one op (decomposed later into halves written in place),
// and an inverse rope's gradient is the rope again.
// CHECK-LABEL: func.func @rope
// CHECK: %[[Y:.+]] = train.rope %{{.+}} theta = 1.000000e+04 : tensor<1x4x2x8xf32>
// CHECK: %[[Z:.+]] = train.rope %[[Y]] theta = 1.000000e+04 inverse : tensor<1x4x2x8xf32>
// CHECK: %[[DZ:.+]] = linalg.generic
// CHECK: %[[DY:.+]] = train.rope %[[DZ]] theta = 1.000000e+04 : tensor<1x4x2x8xf32>
// CHECK: %[[DX:.+]] = train.rope %[[DY]] theta = 1.000000e+04 inverse : tensor<1x4x2x8xf32>
// CHECK: return %{{.+}}, %[[DX]]
func.func @rope(%x: tensor<1x4x2x8xf32> {train.param = "x"}) -> (tensor<f32> {train.loss}) {
  %y = train.rope %x theta = 10000.0 : tensor<1x4x2x8xf32>
  %w = train.rope %y theta = 10000.0 inverse : tensor<1x4x2x8xf32>
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %f0 = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%w : tensor<1x4x2x8xf32>) outs(%f0 : tensor<f32>) dimensions = [0, 1, 2, 3]
    (%in: f32, %acc: f32) {
      %sq = arith.mulf %in, %in : f32
      %r = arith.addf %sq, %acc : f32
      linalg.yield %r : f32
    }
  return %l : tensor<f32>
}

// -----

// RoPE splits a tensor into halves and rejoins them. The gradient of each
// half is read straight from the output's gradient (past the zeros the
// second insertion's rule puts in its slice), and the halves' gradients,
// zeros but for slices that do not overlap, are inserted into one tensor
// instead of padded and added: no fill, no add.
// CHECK-LABEL: func.func @rope_halves
// CHECK: %[[E:.+]] = tensor.empty() : tensor<3x8xf32>
// CHECK: %[[DY:.+]] = linalg.generic
// CHECK-DAG: %[[D2:.+]] = tensor.extract_slice %[[DY]][0, 4] [3, 4] [1, 1]
// CHECK-DAG: %[[D1:.+]] = tensor.extract_slice %[[DY]][0, 0] [3, 4] [1, 1]
// CHECK: %[[G2:.+]] = linalg.generic {{.*}} ins(%[[D2]] :
// CHECK-NOT: outs(%{{.+}} : tensor<3x8xf32>)
// CHECK: %[[I:.+]] = tensor.insert_slice %[[G2]] into %[[E]][0, 4] [3, 4] [1, 1]
// CHECK: %[[DX:.+]] = tensor.insert_slice %{{.+}} into %[[I]][0, 0] [3, 4] [1, 1]
// CHECK: return %{{.+}}, %[[DX]]
func.func @rope_halves(%x: tensor<3x8xf32> {train.param = "x"}, %c: tensor<3x4xf32> {train.input}) -> (tensor<f32> {train.loss}) {
  %x1 = tensor.extract_slice %x[0, 0] [3, 4] [1, 1] : tensor<3x8xf32> to tensor<3x4xf32>
  %x2 = tensor.extract_slice %x[0, 4] [3, 4] [1, 1] : tensor<3x8xf32> to tensor<3x4xf32>
  %e = tensor.empty() : tensor<3x4xf32>
  %r1 = linalg.mul ins(%x1, %c : tensor<3x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %r2 = linalg.sub ins(%x2, %x1 : tensor<3x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %o = tensor.empty() : tensor<3x8xf32>
  %i1 = tensor.insert_slice %r1 into %o[0, 0] [3, 4] [1, 1] : tensor<3x4xf32> into tensor<3x8xf32>
  %y = tensor.insert_slice %r2 into %i1[0, 4] [3, 4] [1, 1] : tensor<3x4xf32> into tensor<3x8xf32>
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %f0 = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%y : tensor<3x8xf32>) outs(%f0 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %sq = arith.mulf %in, %in : f32
      %r = arith.addf %sq, %acc : f32
      linalg.yield %r : f32
    }
  return %l : tensor<f32>
}
