// Tests that train-decompose replaces each train op by linalg on tensors.
// Numerical checks of the decompositions are in test/Numerics.
// RUN: loom-opt %s -split-input-file -train-decompose | FileCheck %s

// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[W:.+]]: tensor<8xf32>)
func.func @rms_norm(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  // CHECK-NOT: train.
  // CHECK: %[[SS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[X]] : tensor<2x8xf32>)
  // CHECK: arith.mulf
  // CHECK: arith.addf
  // CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} ins(%[[X]], %[[SS]], %[[W]] : tensor<2x8xf32>, tensor<2xf32>, tensor<8xf32>)
  // CHECK: math.rsqrt
  %y = train.rms_norm %x, %w eps = 1.0e-5 : tensor<2x8xf32>, tensor<8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @embedding
func.func @embedding(%t: tensor<10x4xf32>, %ids: tensor<2x3xi32>) -> (tensor<2x3x4xf32>, tensor<10x4xf32>) {
  // CHECK: linalg.generic {{.*}} ins(%{{.+}} : tensor<2x3xi32>)
  // CHECK: arith.index_cast
  // CHECK: tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<10x4xf32>
  %x = train.embedding %t[%ids] : tensor<10x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  // The gradient is a loop over the 6 tokens, not a one-hot contraction.
  // CHECK: tensor.collapse_shape %{{.+}} {{\[\[}}0, 1]] : tensor<2x3xi32> into tensor<6xi32>
  // CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step
  // CHECK: tensor.extract_slice %{{.+}}[%{{.+}}, 0] [1, 4] [1, 1]
  // CHECK: tensor.insert_slice
  // CHECK-NOT: train.
  %g = train.embedding_grad %x[%ids] : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<10x4xf32>
  return %x, %g : tensor<2x3x4xf32>, tensor<10x4xf32>
}

// -----

// Grouped-query attention reads each kv head directly: no repeated keys.
// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<1x4x4x8xf32>, %k: tensor<1x4x2x8xf32>) -> tensor<1x4x4x8xf32> {
  // CHECK: tensor.expand_shape %{{.+}} {{\[\[}}0], [1], [2, 3], [4]] output_shape [1, 4, 2, 2, 8]
  // CHECK: arith.cmpi ule
  // CHECK: arith.maximumf
  // CHECK: math.exp
  // CHECK: arith.divf
  // CHECK: tensor.collapse_shape %{{.+}} {{\[\[}}0], [1], [2, 3], [4]] : tensor<1x4x2x2x8xf32> into tensor<1x4x4x8xf32>
  // CHECK-NOT: train.
  %o = train.attention %q, %k, %k causal scale = 0.35 : tensor<1x4x4x8xf32>, tensor<1x4x2x8xf32>
  return %o : tensor<1x4x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%l: tensor<8x16xf32>, %y: tensor<8xi32>) -> tensor<f32> {
  // Row max, then log-sum-exp, then the target logit with ignored labels
  // reading column 0.
  // CHECK: arith.maximumf
  // CHECK: math.exp
  // CHECK: math.log
  // CHECK: arith.constant -100 : i32
  // CHECK: arith.cmpi ne
  // CHECK: tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<8x16xf32>
  // CHECK-NOT: train.
  %loss = train.cross_entropy %l, %y ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<8x16xf32>, tensor<8xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
