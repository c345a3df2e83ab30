// Tests convert-linalg-to-blas: contractions on buffers become one
// cblas_sgemm (or one strided batched call over a batch dimension) with the
// right transposes, leading dimensions from the strides; anything else stays.
// RUN: loom-opt %s -split-input-file -convert-linalg-to-blas -cse | FileCheck %s
// RUN: loom-opt %s -split-input-file -convert-linalg-to-blas -canonicalize -cse | FileCheck %s --check-prefix=BATCH
// RUN: loom-opt %s -split-input-file -convert-linalg-to-blas=batch=false -canonicalize -cse | FileCheck %s --check-prefix=LOOP
// RUN: loom-opt %s -split-input-file -convert-linalg-to-blas=library=cublas -cse | FileCheck %s --check-prefix=CUBLAS
// RUN: not loom-opt %s -split-input-file -convert-linalg-to-blas=library=mkl 2>&1 | FileCheck %s --check-prefix=BAD

// CUBLAS: func.func private @loomrt_cublas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
// CUBLAS-LABEL: func.func @plain
// CUBLAS: call @loomrt_cublas_sgemm(
// CUBLAS-NOT: cblas
// BAD: library must be cblas or cublas, not 'mkl'

// CHECK: func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
// CHECK-LABEL: func.func @plain
// CHECK-DAG: %[[ROW:.+]] = arith.constant 101 : i32
// CHECK-DAG: %[[N:.+]] = arith.constant 111 : i32
// CHECK: call @cblas_sgemm(%[[ROW]], %[[N]], %[[N]],
// CHECK-NOT: linalg.matmul
func.func @plain(%a: memref<6x8xf32>, %b: memref<8x5xf32>, %c: memref<6x5xf32>) {
  linalg.matmul ins(%a, %b : memref<6x8xf32>, memref<8x5xf32>) outs(%c : memref<6x5xf32>)
  return
}

// -----

// The weight gradient autodiff emits, dW(i, j) += dY(k, i) X(k, j): A is
// transposed (CblasTrans = 112).
#kj = affine_map<(k, i, j) -> (k, i)>
#ki = affine_map<(k, i, j) -> (k, j)>
#ij = affine_map<(k, i, j) -> (i, j)>
// CHECK-LABEL: func.func @weight_gradient
// CHECK-DAG: %[[T:.+]] = arith.constant 112 : i32
// CHECK-DAG: %[[N:.+]] = arith.constant 111 : i32
// CHECK: call @cblas_sgemm(%{{.+}}, %[[T]], %[[N]],
// CHECK-NOT: linalg.generic
func.func @weight_gradient(%dy: memref<8x6xf32>, %x: memref<8x5xf32>, %dw: memref<6x5xf32>) {
  linalg.generic {indexing_maps = [#kj, #ki, #ij], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%dy, %x : memref<8x6xf32>, memref<8x5xf32>) outs(%dw : memref<6x5xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// B read transposed (x @ w^T), from a row-contiguous strided view: the
// leading dimension comes from the view's outer stride.
// CHECK-LABEL: func.func @transposed_b_view
// CHECK: %[[META:.+]], %{{.+}}, %{{.+}}:2, %[[STRIDES:.+]]:2 = memref.extract_strided_metadata %arg1
// CHECK: %[[LDB:.+]] = arith.index_cast %[[STRIDES]]#0 : index to i32
// CHECK: call @cblas_sgemm(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[LDB]],
#ik = affine_map<(i, j, k) -> (i, k)>
#jk = affine_map<(i, j, k) -> (j, k)>
#ij2 = affine_map<(i, j, k) -> (i, j)>
func.func @transposed_b_view(%x: memref<6x8xf32>, %w: memref<5x8xf32, strided<[16, 1], offset: 4>>, %y: memref<6x5xf32>) {
  linalg.matmul indexing_maps = [#ik, #jk, #ij2] ins(%x, %w : memref<6x8xf32>, memref<5x8xf32, strided<[16, 1], offset: 4>>) outs(%y : memref<6x5xf32>)
  return
}

// -----

// Batched: one strided batched call (strides 48, 40 and 30 floats, 2
// elements) or, with batch=false, one call per batch element, each operand
// at its batch offset.
// BATCH: func.func private @loomrt_cblas_sgemm_batched(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, i64, !llvm.ptr, i32, i64, f32, !llvm.ptr, i32, i64, i32)
// BATCH-LABEL: func.func @batched
// BATCH-DAG: %[[SA:.+]] = arith.constant 48 : i64
// BATCH-DAG: %[[SB:.+]] = arith.constant 40 : i64
// BATCH-DAG: %[[SC:.+]] = arith.constant 30 : i64
// BATCH-DAG: %[[TWO:.+]] = arith.constant 2 : i32
// BATCH-NOT: scf.for
// BATCH: call @loomrt_cblas_sgemm_batched({{.*}}, %[[SA]], {{.*}}, %[[SB]], {{.*}}, %[[SC]], %[[TWO]])
// BATCH-NOT: linalg.batch_matmul
// BATCH: return
// LOOP-LABEL: func.func @batched
// LOOP-DAG: %[[A:.+]] = arith.constant 192 : index
// LOOP-DAG: %[[B:.+]] = arith.constant 160 : index
// LOOP-DAG: %[[C:.+]] = arith.constant 120 : index
// LOOP: scf.for %[[I:.+]] = %c0 to %c2 step %c1
// LOOP: arith.muli %[[I]], %[[A]]
// LOOP: arith.muli %[[I]], %[[B]]
// LOOP: arith.muli %[[I]], %[[C]]
// LOOP: call @cblas_sgemm(
// LOOP-NOT: linalg.batch_matmul
// LOOP: return
func.func @batched(%a: memref<2x6x8xf32>, %b: memref<2x8x5xf32>, %c: memref<2x6x5xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x6x8xf32>, memref<2x8x5xf32>) outs(%c : memref<2x6x5xf32>)
  return
}

// -----

// Attention's scores under grouped-query attention: Q is [batch, seq,
// kv-heads, group, dim], K [batch, seq, kv-heads, dim] (no group: stride 0),
// the scores [batch, kv-heads, group, seq, seq]. Rows of Q are 64 apart
// (lda), K is read transposed. The largest batch dimension (batch, 4) is the
// call's, with strides 2048, 1024 and 4096; the others are loops.
#q = affine_map<(b, h, g, i, j, d) -> (b, i, h, g, d)>
#kk = affine_map<(b, h, g, i, j, d) -> (b, j, h, d)>
#s = affine_map<(b, h, g, i, j, d) -> (b, h, g, i, j)>
// BATCH-LABEL: func.func @gqa_scores
// BATCH-DAG: %[[T:.+]] = arith.constant 112 : i32
// BATCH-DAG: %[[LDA:.+]] = arith.constant 64 : i32
// BATCH-DAG: %[[FOUR:.+]] = arith.constant 4 : i32
// BATCH: scf.for %[[H:.+]] = %c0 to %c2
// BATCH: scf.for %[[G:.+]] = %c0 to %c2
// BATCH-NOT: scf.for
// BATCH: call @loomrt_cblas_sgemm_batched(%{{.+}}, %{{.+}}, %[[T]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[LDA]], %c2048_i64, %{{.+}}, %{{.+}}, %c1024_i64, %{{.+}}, %{{.+}}, %{{.+}}, %c4096_i64, %[[FOUR]])
// BATCH-NOT: linalg.generic
// BATCH: return
// LOOP-LABEL: func.func @gqa_scores
// LOOP: scf.for %[[B:.+]] = %c0 to %c4
// LOOP: scf.for %[[H:.+]] = %c0 to %c2
// LOOP: scf.for %[[G:.+]] = %c0 to %c2
// LOOP: call @cblas_sgemm(%{{.+}}, %{{.+}}, %c112_i32, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %c64_i32,
// LOOP: return
func.func @gqa_scores(%q: memref<4x32x2x2x16xf32>, %k: memref<4x32x2x16xf32>, %s: memref<4x2x2x32x32xf32>) {
  linalg.generic {indexing_maps = [#q, #kk, #s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<4x32x2x2x16xf32>, memref<4x32x2x16xf32>) outs(%s : memref<4x2x2x32x32xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %t = arith.addf %c, %m : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A second reduction (summed over b) is an inner loop of GEMMs that
// accumulate into the same C (beta = 1), each at its b's offsets in A and B.
#bik = affine_map<(b, i, j, k) -> (b, i, k)>
#bkj = affine_map<(b, i, j, k) -> (b, k, j)>
#ij4 = affine_map<(b, i, j, k) -> (i, j)>
// CHECK-LABEL: func.func @two_reductions
// CHECK: scf.for %[[B:.*]] = %c0 to %c2 step %c1
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: arith.muli %[[B]], %strides#0
// CHECK: arith.muli %[[B]], %strides_{{[0-9]+}}#0
// CHECK-NOT: arith.muli %[[B]]
// CHECK: func.call @cblas_sgemm(%c101_i32, %c111_i32, %c111_i32, %c6_i32, %c5_i32, %c8_i32, %[[ONE]], {{.*}}, %[[ONE]], {{.*}})
// CHECK-NOT: linalg.generic
func.func @two_reductions(%a: memref<2x6x8xf32>, %b: memref<2x8x5xf32>, %c: memref<6x5xf32>) {
  linalg.generic {indexing_maps = [#bik, #bkj, #ij4], iterator_types = ["reduction", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x6x8xf32>, memref<2x8x5xf32>) outs(%c : memref<6x5xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %m = arith.mulf %x, %y : f32
    %r = arith.addf %z, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Grouped-query attention's P @ V into the [b, s, kv, g, d] layout: C's
// second-last dimension is the group (3), but the GEMM's rows are the
// sequence (32, the largest that fits, ldc = kv x g x d), so there are
// b x kv x g = 12 GEMMs of 32x16x32 rather than b x s x kv = 128 of 3x16x32:
// a batched call over the group (V's stride 0) in b x kv loops. The scale
// in the body is alpha.
#p = affine_map<(b, s, kv, g, d, t) -> (b, kv, g, s, t)>
#v = affine_map<(b, s, kv, g, d, t) -> (b, t, kv, d)>
#o = affine_map<(b, s, kv, g, d, t) -> (b, s, kv, g, d)>
// CHECK-LABEL: func.func @gqa_pv
// CHECK-COUNT-2: scf.for
// CHECK-NOT: scf.for
// CHECK-DAG: %[[ALPHA:.*]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: func.call @loomrt_cblas_sgemm_batched(%c101_i32, %c111_i32, %c111_i32, %c32_i32, %c16_i32, %c32_i32, %[[ALPHA]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64, %[[ONE]], %{{.*}}, %{{.*}}, %{{.*}}, %c3_i32)
// CHECK-NOT: linalg.generic
// LOOP-LABEL: func.func @gqa_pv
// LOOP-COUNT-3: scf.for
// LOOP: func.call @cblas_sgemm(%c101_i32, %c111_i32, %c111_i32, %c32_i32, %c16_i32, %c32_i32,
func.func @gqa_pv(%p: memref<2x2x3x32x32xf32>, %v: memref<2x32x2x16xf32>, %o: memref<2x32x2x3x16xf32>) {
  %scale = arith.constant 0.25 : f32
  linalg.generic {indexing_maps = [#p, #v, #o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<2x2x3x32x32xf32>, memref<2x32x2x16xf32>) outs(%o : memref<2x32x2x3x16xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.mulf %m, %scale : f32
    %r = arith.addf %z, %s : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Its dV: summed over the group and the sequence. The sequence (32) is the
// GEMM's reduction, Pᵀ is A (transposed), and the group is an inner
// accumulation loop; kv (2, the innermost of the largest) is the call's
// batch, b a loop.
#pg = affine_map<(b, t, kv, d, g, s) -> (b, kv, g, s, t)>
#dog = affine_map<(b, t, kv, d, g, s) -> (b, s, kv, g, d)>
#dv = affine_map<(b, t, kv, d, g, s) -> (b, t, kv, d)>
// CHECK-LABEL: func.func @gqa_dv
// CHECK: scf.for %{{.*}} = %c0 to %c2
// CHECK: scf.for %{{.*}} = %c0 to %c3
// CHECK-NOT: scf.for
// CHECK: func.call @loomrt_cblas_sgemm_batched(%c101_i32, %c112_i32, %c111_i32, %c32_i32, %c16_i32, %c32_i32, {{.*}}, %c2_i32)
// CHECK-NOT: linalg.generic
func.func @gqa_dv(%p: memref<2x2x3x32x32xf32>, %do: memref<2x32x2x3x16xf32>, %dv: memref<2x32x2x16xf32>) {
  linalg.generic {indexing_maps = [#pg, #dog, #dv], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%p, %do : memref<2x2x3x32x32xf32>, memref<2x32x2x3x16xf32>) outs(%dv : memref<2x32x2x16xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %m = arith.mulf %x, %y : f32
    %r = arith.addf %z, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Not a contraction BLAS takes: a non-unit inner stride, a scale that is not
// a constant, and tensors (not bufferised). All stay.
#ik = affine_map<(i, j, k) -> (i, k)>
#kj = affine_map<(i, j, k) -> (k, j)>
#ij = affine_map<(i, j, k) -> (i, j)>
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: cblas_sgemm
// CHECK: linalg.matmul
// CHECK: linalg.generic
// CHECK: linalg.matmul
func.func @left_alone(%s: memref<6x8xf32, strided<[1, 6]>>, %t: memref<8x5xf32>, %u: memref<6x5xf32>,
                      %a: memref<6x8xf32>, %w: f32,
                      %ta: tensor<6x8xf32>, %tb: tensor<8x5xf32>, %tc: tensor<6x5xf32>) -> tensor<6x5xf32> {
  linalg.matmul ins(%s, %t : memref<6x8xf32, strided<[1, 6]>>, memref<8x5xf32>) outs(%u : memref<6x5xf32>)
  linalg.generic {indexing_maps = [#ik, #kj, #ij], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %t : memref<6x8xf32>, memref<8x5xf32>) outs(%u : memref<6x5xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %m = arith.mulf %x, %y : f32
    %sc = arith.mulf %m, %w : f32
    %r = arith.addf %z, %sc : f32
    linalg.yield %r : f32
  }
  %r = linalg.matmul ins(%ta, %tb : tensor<6x8xf32>, tensor<8x5xf32>) outs(%tc : tensor<6x5xf32>) -> tensor<6x5xf32>
  return %r : tensor<6x5xf32>
}

// -----

// bf16: the runtime's GEMMs (the Debian OpenBLAS has none), f32 alpha and
// beta, byte offsets of 2 per bf16 element and 4 per f32; a bf16 C is
// bgemm, an f32 C (the logits) sbgemm; batched over heads likewise.
// CHECK-LABEL: func.func @bf16
// CHECK-DAG: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[TWO:.+]] = arith.constant 2 : index
// CHECK: arith.muli %{{.+}}, %[[TWO]] : index
// CHECK: call @loomrt_cblas_bgemm(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[ONE]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[ONE]],
// CHECK: %[[FOUR:.+]] = arith.constant 4 : index
// CHECK: arith.muli %{{.+}}, %[[FOUR]] : index
// CHECK: call @loomrt_cblas_sbgemm(
// CHECK: call @loomrt_cblas_bgemm_batched(
// CHECK-NOT: linalg.
// CUBLAS-LABEL: func.func @bf16
// CUBLAS: call @loomrt_cublas_bgemm(
// CUBLAS: call @loomrt_cublas_sbgemm(
// CUBLAS: call @loomrt_cublas_bgemm_batched(
// LOOP-LABEL: func.func @bf16
// LOOP: scf.for
// LOOP: call @loomrt_cblas_bgemm(
#q = affine_map<(h, i, j, d) -> (i, h, d)>
#k = affine_map<(h, i, j, d) -> (j, h, d)>
#s = affine_map<(h, i, j, d) -> (h, i, j)>
func.func @bf16(%a: memref<6x8xbf16>, %b: memref<8x5xbf16>, %c: memref<6x5xbf16>,
                %logits: memref<6x5xf32>, %qm: memref<16x4x8xbf16>, %km: memref<16x4x8xbf16>,
                %sm: memref<4x16x16xbf16>) {
  linalg.matmul ins(%a, %b : memref<6x8xbf16>, memref<8x5xbf16>) outs(%c : memref<6x5xbf16>)
  linalg.matmul ins(%a, %b : memref<6x8xbf16>, memref<8x5xbf16>) outs(%logits : memref<6x5xf32>)
  linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%qm, %km : memref<16x4x8xbf16>, memref<16x4x8xbf16>) outs(%sm : memref<4x16x16xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %m = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %m : bf16
    linalg.yield %s : bf16
  }
  return
}

// -----

// A GEMM into a buffer just filled with zeros calls with beta = 0, and the
// fill goes; effect-free ops between them do not matter.
// CHECK-LABEL: func.func @zero_fill
// CHECK-NOT: linalg.fill
// CHECK: %[[BETA:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: call @cblas_sgemm({{.*}}, %[[BETA]], %{{[^,]+}}, %{{[^,]+}}) : (
// CHECK-NOT: linalg.fill
func.func @zero_fill(%a: memref<6x8xf32>, %b: memref<8x5xf32>, %c: memref<6x5xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<6x5xf32>)
  %unused = arith.constant 1 : index
  linalg.matmul ins(%a, %b : memref<6x8xf32>, memref<8x5xf32>) outs(%c : memref<6x5xf32>)
  return
}

// -----

// beta = 1 (C accumulates) and the fill stays: a fill of something else
// than zero, an op with memory effects between, a fill before the loop
// the GEMM accumulates in, and a second reduction whose GEMMs accumulate.
// CHECK-LABEL: func.func @fills_kept
// CHECK: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ONE]] : f32) outs(%arg2
// CHECK: call @cblas_sgemm({{.*}}, %[[ONE]], %{{[^,]+}}, %{{[^,]+}}) : (
// CHECK: linalg.fill
// CHECK: memref.store
// CHECK: call @cblas_sgemm({{.*}}, %[[ONE]], %{{[^,]+}}, %{{[^,]+}}) : (
// CHECK: linalg.fill
// CHECK: scf.for
// CHECK: call @cblas_sgemm({{.*}}, %[[ONE]], %{{[^,]+}}, %{{[^,]+}}) : (
func.func @fills_kept(%a: memref<6x8xf32>, %b: memref<8x5xf32>, %c: memref<6x5xf32>, %d: memref<6x5xf32>, %e: memref<6x5xf32>, %x: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  %i4 = arith.constant 4 : index
  linalg.fill ins(%one : f32) outs(%c : memref<6x5xf32>)
  linalg.matmul ins(%a, %b : memref<6x8xf32>, memref<8x5xf32>) outs(%c : memref<6x5xf32>)
  linalg.fill ins(%zero : f32) outs(%d : memref<6x5xf32>)
  memref.store %one, %x[%i0] : memref<4xf32>
  linalg.matmul ins(%a, %b : memref<6x8xf32>, memref<8x5xf32>) outs(%d : memref<6x5xf32>)
  linalg.fill ins(%zero : f32) outs(%e : memref<6x5xf32>)
  scf.for %i = %i0 to %i4 step %i1 {
    linalg.matmul ins(%a, %b : memref<6x8xf32>, memref<8x5xf32>) outs(%e : memref<6x5xf32>)
  }
  return
}

// -----

// Two reductions: the inner loop's GEMMs accumulate into C, so the fill
// before them stays.
#q = affine_map<(g, i, j, k) -> (g, i, k)>
#k = affine_map<(g, i, j, k) -> (g, k, j)>
#o = affine_map<(g, i, j, k) -> (i, j)>
// CHECK-LABEL: func.func @two_reductions_filled
// CHECK: linalg.fill
// CHECK: scf.for
// CHECK: call @cblas_sgemm
func.func @two_reductions_filled(%a: memref<3x6x8xf32>, %b: memref<3x8x5xf32>, %c: memref<6x5xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<6x5xf32>)
  linalg.generic {indexing_maps = [#q, #k, #o], iterator_types = ["reduction", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<3x6x8xf32>, memref<3x8x5xf32>) outs(%c : memref<6x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
