// RUN: loom-opt %s --allow-unregistered-dialect --pass-pipeline='builtin.module(func.func(codegen-widen-compute))' --split-input-file | FileCheck %s

#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A sum of squares accumulates into an f32 fill; the generic that reads it
// reads the f32 sum (no rounding on the way to the division) and computes
// in f32, rounding once at its yield. The rounded sum is still returned, so
// it is kept.
// CHECK-LABEL: func.func @norm
// CHECK: %[[ACC:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<8xf32>)
// CHECK: %[[SS:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<8x64xbf16>) outs(%[[ACC]] : tensor<8xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[OUT:.*]]: f32):
// CHECK-NEXT: %[[A32:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: %[[SQ:.*]] = arith.mulf %[[A32]], %[[A32]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[OUT]], %[[SQ]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: %[[ROUNDED:.*]] = linalg.generic {{.*}} ins(%[[SS]] : tensor<8xf32>) outs(%{{.*}} : tensor<8xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%arg0, %[[SS]] : tensor<8x64xbf16>, tensor<8xf32>) outs(%{{.*}} : tensor<8x64xbf16>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: bf16, %[[SUM:.*]]: f32, %{{.*}}: bf16):
// CHECK: %[[X32:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK: %[[C:.*]] = arith.constant 6.400000e+01 : f32
// CHECK: %[[MEAN:.*]] = arith.divf %[[SUM]], %[[C]] : f32
// CHECK: %[[R:.*]] = math.rsqrt %[[MEAN]] : f32
// CHECK: %[[P:.*]] = arith.mulf %[[X32]], %[[R]] : f32
// CHECK: %[[T:.*]] = arith.truncf %[[P]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[T]] : bf16
// CHECK: return %[[Y]], %[[ROUNDED]]
func.func @norm(%x: tensor<8x64xbf16>) -> (tensor<8x64xbf16>, tensor<8xbf16>) {
  %zero = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<8xbf16>
  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<8xbf16>) -> tensor<8xbf16>
  %ss = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x64xbf16>) outs(%z : tensor<8xbf16>) {
  ^bb0(%a: bf16, %acc: bf16):
    %sq = arith.mulf %a, %a : bf16
    %s = arith.addf %acc, %sq : bf16
    linalg.yield %s : bf16
  } -> tensor<8xbf16>
  %e2 = tensor.empty() : tensor<8x64xbf16>
  %y = linalg.generic {indexing_maps = [#rows, #row, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : tensor<8x64xbf16>, tensor<8xbf16>) outs(%e2 : tensor<8x64xbf16>) {
  ^bb0(%v: bf16, %sum: bf16, %o: bf16):
    %c = arith.constant 64.0 : bf16
    %mean = arith.divf %sum, %c : bf16
    %r = math.rsqrt %mean : bf16
    %p = arith.mulf %v, %r : bf16
    linalg.yield %p : bf16
  } -> tensor<8x64xbf16>
  return %y, %ss : tensor<8x64xbf16>, tensor<8xbf16>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i) -> (i)>

// Left alone: a multiply-accumulate contraction (BLAS's bf16 GEMMs
// accumulate in f32), f32 generics, and a body with a bit cast.
// CHECK-LABEL: func.func @left_alone
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<8x16xbf16>)
// CHECK-NEXT: ^bb0(%{{.*}}: bf16, %{{.*}}: bf16, %{{.*}}: bf16):
// CHECK-NEXT: arith.mulf %{{.*}} : bf16
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<8xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT: arith.negf
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<8xbf16>)
// CHECK-NEXT: ^bb0(%{{.*}}: i16, %{{.*}}: bf16):
// CHECK-NEXT: arith.bitcast %{{.*}} : i16 to bf16
func.func @left_alone(%a: tensor<8x32xbf16>, %b: tensor<16x32xbf16>, %c: tensor<8x16xbf16>,
                      %f: tensor<8xf32>, %i: tensor<8xi16>)
    -> (tensor<8x16xbf16>, tensor<8xf32>, tensor<8xbf16>) {
  %mm = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<8x32xbf16>, tensor<16x32xbf16>) outs(%c : tensor<8x16xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %o: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %o, %p : bf16
    linalg.yield %s : bf16
  } -> tensor<8x16xbf16>
  %ef = tensor.empty() : tensor<8xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%f : tensor<8xf32>) outs(%ef : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  %eb = tensor.empty() : tensor<8xbf16>
  %bits = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%i : tensor<8xi16>) outs(%eb : tensor<8xbf16>) {
  ^bb0(%x: i16, %o: bf16):
    %v = arith.bitcast %x : i16 to bf16
    linalg.yield %v : bf16
  } -> tensor<8xbf16>
  return %mm, %neg, %bits : tensor<8x16xbf16>, tensor<8xf32>, tensor<8xbf16>
}

// -----

#id = affine_map<(i) -> (i)>

// Casts fold into the f32 body: bf16 -> f32 is the argument itself, f64
// -> bf16 rounds to f32 (the yield rounds to bf16), and a bf16 value from
// above is extended once. An accumulator that is not a fill is extended.
// CHECK-LABEL: func.func @casts
// CHECK: %[[INIT:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<bf16>) outs(%{{.*}} : tensor<f32>)
// CHECK: linalg.generic {{.*}} ins(%arg0 : tensor<8xbf16>) outs(%[[INIT]] : tensor<f32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: bf16, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[IN32:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: %[[K32:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[IN32]] : f32 to f64
// CHECK-NEXT: %[[SQ:.*]] = arith.mulf %[[W]], %[[W]] : f64
// CHECK-NEXT: %[[N:.*]] = arith.truncf %[[SQ]] : f64 to f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[N]], %[[K32]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[M]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
func.func @casts(%x: tensor<8xbf16>, %init: tensor<bf16>, %k: bf16) -> tensor<bf16> {
  %r = linalg.generic {indexing_maps = [#id, affine_map<(i) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<8xbf16>) outs(%init : tensor<bf16>) {
  ^bb0(%a: bf16, %acc: bf16):
    %w = arith.extf %a : bf16 to f64
    %sq = arith.mulf %w, %w : f64
    %n = arith.truncf %sq : f64 to bf16
    %m = arith.mulf %n, %k : bf16
    %s = arith.addf %acc, %m : bf16
    linalg.yield %s : bf16
  } -> tensor<bf16>
  return %r : tensor<bf16>
}

// -----

#mn = affine_map<(m, k, n) -> (m, n)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mk = affine_map<(m, k, n) -> (m, k)>

// The adjoint of f32 logits over bf16 operands: an f32 gradient times a
// bf16 weight, each product rounded into a bf16 accumulator. The f32
// operand is rounded once instead and the contraction becomes a bf16
// multiply-accumulate, which BLAS takes (and accumulates in f32).
// CHECK-LABEL: func.func @mixed_contraction
// CHECK: %[[D16:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<8x32xf32>) outs(%{{.*}} : tensor<8x32xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: linalg.generic {{.*}} ins(%[[D16]], %arg1 : tensor<8x32xbf16>, tensor<32x16xbf16>) outs(%arg2 : tensor<8x16xbf16>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[C:.*]]: bf16):
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[A]], %[[B]] : bf16
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[C]], %[[P]] : bf16
// CHECK-NEXT: linalg.yield %[[S]] : bf16
func.func @mixed_contraction(%d: tensor<8x32xf32>, %w: tensor<32x16xbf16>, %init: tensor<8x16xbf16>)
    -> tensor<8x16xbf16> {
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%d, %w : tensor<8x32xf32>, tensor<32x16xbf16>) outs(%init : tensor<8x16xbf16>) {
  ^bb0(%a: f32, %b: bf16, %c: bf16):
    %bx = arith.extf %b : bf16 to f32
    %p = arith.mulf %a, %bx : f32
    %pt = arith.truncf %p : f32 to bf16
    %s = arith.addf %c, %pt : bf16
    linalg.yield %s : bf16
  } -> tensor<8x16xbf16>
  return %r : tensor<8x16xbf16>
}

// -----

// A body op of a dialect Loom does not know is left as it is (nothing to
// say how it computes in f32), and so is an unknown op outside generics.
// CHECK-LABEL: func.func @unknown_body_op
// CHECK: linalg.generic
// CHECK-SAME: outs(%{{.+}} : tensor<4xbf16>)
// CHECK: "foo.op"(%{{.+}}) : (bf16) -> bf16
// CHECK: "foo.bar"
func.func @unknown_body_op(%w: tensor<4xbf16>) -> tensor<4xbf16> {
  %e = tensor.empty() : tensor<4xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%w : tensor<4xbf16>) outs(%e : tensor<4xbf16>) {
  ^bb0(%a: bf16, %b: bf16):
    %x = "foo.op"(%a) : (bf16) -> bf16
    linalg.yield %x : bf16
  } -> tensor<4xbf16>
  %u = "foo.bar"(%r) : (tensor<4xbf16>) -> tensor<4xbf16>
  return %u : tensor<4xbf16>
}
