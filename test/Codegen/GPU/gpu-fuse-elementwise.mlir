// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(gpu-fuse-elementwise))' --split-input-file | FileCheck %s
// The fused op is located at both ops, so both op ids reach the profile.
// RUN: loom-opt %s --pass-pipeline='builtin.module(trainer-stamp-op-ids,func.func(gpu-fuse-elementwise))' --split-input-file -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s --check-prefix=LOC

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// An elementwise producer with one user is fused into it, here a row
// reduction (RMSNorm's sum of squares of a residual sum): one generic.
// CHECK-LABEL: func.func @into_reduction
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%arg0, %arg1 : tensor<8x64xf32>, tensor<8x64xf32>)
// CHECK: arith.addf
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
// LOC-LABEL: func.func @into_reduction
// LOC: } -> tensor<8xf32> loc(fused["loom.op.5"({{.*}}), "loom.op.2"({{.*}})])
func.func @into_reduction(%a: tensor<8x64xf32>, %b: tensor<8x64xf32>) -> tensor<8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<8x64xf32>, tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<8x64xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%s : tensor<8x64xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %sq = arith.mulf %x, %x : f32
    %r = arith.addf %acc, %sq : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %ss : tensor<8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>

// codegen-widen-compute rounds the f32 operand of a bf16 GEMM first; fusing
// that rounding into the GEMM would leave BLAS nothing to take. Both stay,
// and so does the GEMM's result's elementwise user.
// CHECK-LABEL: func.func @gemm_kept
// CHECK: %[[R:.*]] = linalg.generic
// CHECK: arith.truncf
// CHECK: %[[G:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[R]], %arg1 : tensor<16x32xbf16>, tensor<32x8xbf16>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.addf
// CHECK-NEXT: linalg.yield
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[G]] : tensor<16x8xbf16>)
func.func @gemm_kept(%x: tensor<16x32xf32>, %w: tensor<32x8xbf16>) -> tensor<16x8xbf16> {
  %c0 = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<16x32xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<16x32xf32>) outs(%e : tensor<16x32xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<16x32xbf16>
  %e1 = tensor.empty() : tensor<16x8xbf16>
  %z = linalg.fill ins(%c0 : bf16) outs(%e1 : tensor<16x8xbf16>) -> tensor<16x8xbf16>
  %g = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%r, %w : tensor<16x32xbf16>, tensor<32x8xbf16>) outs(%z : tensor<16x8xbf16>) {
  ^bb0(%p: bf16, %q: bf16, %acc: bf16):
    %m = arith.mulf %p, %q : bf16
    %s = arith.addf %acc, %m : bf16
    linalg.yield %s : bf16
  } -> tensor<16x8xbf16>
  %e2 = tensor.empty() : tensor<16x8xbf16>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<16x8xbf16>) outs(%e2 : tensor<16x8xbf16>) {
  ^bb0(%v: bf16, %o: bf16):
    %t = arith.negf %v : bf16
    linalg.yield %t : bf16
  } -> tensor<16x8xbf16>
  return %n : tensor<16x8xbf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A producer with two users is not fused (it would be computed twice).
// CHECK-LABEL: func.func @two_users
// CHECK-COUNT-3: linalg.generic
func.func @two_users(%a: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %e = tensor.empty() : tensor<8x64xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.exp %x : f32
    linalg.yield %r : f32
  } -> tensor<8x64xf32>
  %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.negf %x : f32
    linalg.yield %r : f32
  } -> tensor<8x64xf32>
  %v = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.mulf %x, %x : f32
    linalg.yield %r : f32
  } -> tensor<8x64xf32>
  return %u, %v : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// ZeRO-3 releases a gathered parameter after its last reader: the producer
// that reads it is not fused into a user after the release.
// CHECK-LABEL: func.func @not_past_release
// CHECK: %[[W:.*]] = coll.wait
// CHECK: %[[P:.*]] = linalg.generic
// CHECK-SAME: ins(%[[W]] : tensor<8xf32>)
// CHECK: coll.release %[[W]]
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[P]] : tensor<8xf32>)
func.func @not_past_release(%c: !coll.comm<2>, %x: tensor<4xf32>) -> tensor<8xf32> {
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  %e = tensor.empty() : tensor<8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = math.exp %v : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  coll.release %w : tensor<8xf32>
  %q = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%p : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.negf %v : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %q : tensor<8xf32>
}
