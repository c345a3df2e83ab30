// train-footprint lowers a copy of each distinct train op and records what
// its lowering allocates beyond its operands and results.
// RUN: loom-opt %s --train-footprint | FileCheck %s
// RUN: loom-opt %s --train-footprint="lowering=builtin.module(train-decompose)" | FileCheck %s
// RUN: not loom-opt %s --train-footprint="lowering=func.func(train-decompose)" 2>&1 | FileCheck %s --check-prefix=ANCHOR

// rms_norm's decomposition holds the per-row sum of squares (4 rows of f32,
// 64 bytes aligned) while it runs; its result is a buffer of its own. Both
// norms are one measurement.
// CHECK-LABEL: func.func @norms
// CHECK: train.rms_norm {{.*}}train.footprint = #train.footprint<scratch = 64, in_place = [-1]>
// CHECK: train.rms_norm {{.*}}train.footprint = #train.footprint<scratch = 64, in_place = [-1]>
// ANCHOR: error: train-footprint: 'lowering' is not a pipeline on builtin.module
func.func @norms(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  %y = train.rms_norm %x, %w eps = 1.0e-05 : tensor<4x64xf32>, tensor<64xf32>
  %z = train.rms_norm %y, %w eps = 1.0e-05 : tensor<4x64xf32>, tensor<64xf32>
  return %z : tensor<4x64xf32>
}

// RoPE's angle tables (cos and sin, 8 positions x 8 frequencies of f32:
// 256 bytes each) depend on the sequence and head dims only: the query's
// and the key's rotations (4 and 2 heads) name the same two tables, which
// codegen-share-index-generics computes once for the step; they are not
// scratch.
// CHECK-LABEL: func.func @rotations
// CHECK: train.rope {{.*}}#train.footprint<scratch = 0, in_place = [-1], tables = {{\[}}[[COS:-?[0-9]+]], 256, [[SIN:-?[0-9]+]], 256]>
// CHECK: train.rope {{.*}}#train.footprint<scratch = 0, in_place = [-1], tables = {{\[}}[[COS]], 256, [[SIN]], 256]>
func.func @rotations(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>) {
  %rq = train.rope %q theta = 1.0e+04 : tensor<1x8x4x16xf32>
  %rk = train.rope %k theta = 1.0e+04 : tensor<1x8x2x16xf32>
  return %rq, %rk : tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>
}
