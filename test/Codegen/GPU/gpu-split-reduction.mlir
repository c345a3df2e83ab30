// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(gpu-split-reduction))' --split-input-file | FileCheck %s
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(gpu-split-reduction{rows=0}))' --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(gpu-split-reduction{min-rows=0}))' --split-input-file | FileCheck %s --check-prefix=EMPTY

#x = affine_map<(b, t, c) -> (b, t, c)>
#r = affine_map<(b, t, c) -> (b, t)>
#o = affine_map<(b, t, c) -> (c)>

// RMSNorm's weight gradient at ~125M: 4 x 2048 tokens into 768 outputs.
// The sequence (the longest reduction) splits into 256 partials of 8 rows,
// each folding 4 x 8 = 32 elements; the batch stays a reduction. The
// partials start from 0 and are added into the original init in order.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[PART:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d3)>
// CHECK-DAG: #[[ALL:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @norm_weight_grad
// CHECK-DAG: %[[DY:.*]] = tensor.expand_shape %arg0 {{\[}}[0], [1, 2], [3]] output_shape [4, 256, 8, 768] : tensor<4x2048x768xf32> into tensor<4x256x8x768xf32>
// CHECK-DAG: %[[X:.*]] = tensor.expand_shape %arg1 {{\[}}[0], [1, 2], [3]] output_shape [4, 256, 8, 768] : tensor<4x2048x768xbf16> into tensor<4x256x8x768xbf16>
// CHECK-DAG: %[[R:.*]] = tensor.expand_shape %arg2 {{\[}}[0], [1, 2]] output_shape [4, 256, 8] : tensor<4x2048xf32> into tensor<4x256x8xf32>
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[FILL:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<256x768xf32>)
// CHECK: %[[P:.*]] = linalg.generic {indexing_maps = [#[[IN]], #[[IN]], #[[ROW]], #[[PART]]], iterator_types = ["reduction", "parallel", "reduction", "parallel"]}
// CHECK-SAME: ins(%[[DY]], %[[X]], %[[R]] : tensor<4x256x8x768xf32>, tensor<4x256x8x768xbf16>, tensor<4x256x8xf32>) outs(%[[FILL]] : tensor<256x768xf32>)
// CHECK: arith.extf
// CHECK: arith.mulf
// CHECK: arith.mulf
// CHECK: %[[A:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: linalg.yield %[[A]]
// CHECK: %[[DW:.*]] = linalg.generic {indexing_maps = [#[[ALL]], #[[COL]]], iterator_types = ["reduction", "parallel"]} ins(%[[P]] : tensor<256x768xf32>) outs(%arg3 : tensor<768xf32>)
// CHECK-NEXT: ^bb0(%[[IN0:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[IN0]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: return %[[DW]]
// OFF-LABEL: func.func @norm_weight_grad
// OFF-NOT: expand_shape
// OFF: iterator_types = ["reduction", "reduction", "parallel"]
func.func @norm_weight_grad(%dy: tensor<4x2048x768xf32>, %x: tensor<4x2048x768xbf16>,
                            %rstd: tensor<4x2048xf32>, %init: tensor<768xf32>) -> tensor<768xf32> {
  %dw = linalg.generic {indexing_maps = [#x, #x, #r, #o],
                        iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%dy, %x, %rstd : tensor<4x2048x768xf32>, tensor<4x2048x768xbf16>, tensor<4x2048xf32>)
      outs(%init : tensor<768xf32>) {
  ^bb0(%g: f32, %v: bf16, %s: f32, %acc: f32):
    %w = arith.extf %v : bf16 to f32
    %p = arith.mulf %g, %w : f32
    %q = arith.mulf %p, %s : f32
    %a = arith.addf %acc, %q : f32
    linalg.yield %a : f32
  } -> tensor<768xf32>
  return %dw : tensor<768xf32>
}

// -----

// A maximum over 1,027 = 13 x 79 rows of a transposed [c, t] operand read
// column-innermost through its map: 79 rows a partial (the smallest divisor
// of at least 32), partials from -inf, combined with the same maximumf.
// CHECK-LABEL: func.func @column_max
// CHECK: tensor.expand_shape %arg0 {{\[}}[0, 1], [2]] output_shape [13, 79, 64] : tensor<1027x64xf32> into tensor<13x79x64xf32>
// CHECK: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.fill ins(%[[NEG]] : f32) outs(%{{.*}} : tensor<13x64xf32>)
// CHECK: iterator_types = ["parallel", "reduction", "parallel"]
// CHECK: arith.maximumf
// CHECK: iterator_types = ["reduction", "parallel"]
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: arith.maximumf %[[IN]], %[[ACC]] : f32
func.func @column_max(%x: tensor<1027x64xf32>, %init: tensor<64xf32>) -> tensor<64xf32> {
  %m = linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (c)>],
                       iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<1027x64xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.maximumf %v, %acc : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  return %m : tensor<64xf32>
}

// -----

// Left alone: a row reduction (the block per row is coalesced), too many
// outputs, too few rows, a prime length with no divisor to split at, a
// body that reads its indices, a multiply-accumulate (BLAS's), an
// integer sum.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: expand_shape
// CHECK: return
func.func @kept(%rows: tensor<768x4096xf32>, %wide: tensor<4096x65536xf32>,
                %short: tensor<512x64xf32>, %prime: tensor<1031x64xf32>,
                %a: tensor<4096x64xf32>, %v: tensor<4096xf32>, %ints: tensor<4096x64xi32>,
                %o768: tensor<768xf32>, %o65536: tensor<65536xf32>, %o64: tensor<64xf32>,
                %i64: tensor<64xi32>)
    -> (tensor<768xf32>, tensor<65536xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>,
        tensor<64xf32>, tensor<64xi32>) {
  %row = linalg.generic {indexing_maps = [affine_map<(c, t) -> (c, t)>, affine_map<(c, t) -> (c)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%rows : tensor<768x4096xf32>) outs(%o768 : tensor<768xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<768xf32>
  %many = linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (c)>],
                          iterator_types = ["reduction", "parallel"]}
      ins(%wide : tensor<4096x65536xf32>) outs(%o65536 : tensor<65536xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<65536xf32>
  %few = linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (c)>],
                         iterator_types = ["reduction", "parallel"]}
      ins(%short : tensor<512x64xf32>) outs(%o64 : tensor<64xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %pr = linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (c)>],
                        iterator_types = ["reduction", "parallel"]}
      ins(%prime : tensor<1031x64xf32>) outs(%o64 : tensor<64xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %idx = linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (c)>],
                         iterator_types = ["reduction", "parallel"]}
      ins(%a : tensor<4096x64xf32>) outs(%o64 : tensor<64xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %t = linalg.index 0 : index
    %ti = arith.index_cast %t : index to i64
    %tf = arith.sitofp %ti : i64 to f32
    %w = arith.mulf %x, %tf : f32
    %s = arith.addf %acc, %w : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %mv = linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (t)>,
                                         affine_map<(t, c) -> (c)>],
                        iterator_types = ["reduction", "parallel"]}
      ins(%a, %v : tensor<4096x64xf32>, tensor<4096xf32>) outs(%o64 : tensor<64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %int = linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (c)>],
                         iterator_types = ["reduction", "parallel"]}
      ins(%ints : tensor<4096x64xi32>) outs(%i64 : tensor<64xi32>) {
  ^bb0(%x: i32, %acc: i32):
    %s = arith.addi %acc, %x : i32
    linalg.yield %s : i32
  } -> tensor<64xi32>
  return %row, %many, %few, %pr, %idx, %mv, %int
      : tensor<768xf32>, tensor<65536xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>,
        tensor<64xf32>, tensor<64xi32>
}

// -----

// No rows at all (with min-rows=0): nothing to split.
// EMPTY-LABEL: func.func @no_rows
// EMPTY-NOT: expand_shape
// EMPTY: return
func.func @no_rows(%x: tensor<0x64xf32>, %init: tensor<64xf32>) -> tensor<64xf32> {
  %s = linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (c)>],
                       iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<0x64xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  return %s : tensor<64xf32>
}
