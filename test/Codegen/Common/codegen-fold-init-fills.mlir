// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(codegen-fold-init-fills))' --split-input-file | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Autodiff's adjoint of an elementwise op: a contribution added into a
// zero-filled init. The body adds the fill's value instead of reading the
// init, which becomes empty; the fill goes.
// CHECK-LABEL: func.func @accumulate_into_zero
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<8x768xbf16>, %[[R:[^:]*]]: tensor<8xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK-NOT: linalg.fill
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8x768xbf16>
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[DY]], %[[R]] : tensor<8x768xbf16>, tensor<8xf32>) outs(%[[E]] : tensor<8x768xbf16>)
// CHECK-NEXT: ^bb0(%{{[^:]*}}: bf16, %{{[^:]*}}: f32, %[[ACC:[^:]*]]: bf16):
// CHECK-NOT: %[[ACC]]
// CHECK: %[[Z:.*]] = arith.extf %[[ZERO]] : bf16 to f32
// CHECK: arith.addf %[[Z]], %{{.*}} : f32
// CHECK-NOT: linalg.fill
func.func @accumulate_into_zero(%dy: tensor<8x768xbf16>, %r: tensor<8xf32>) -> tensor<8x768xbf16> {
  %c0 = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<8x768xbf16>
  %z = linalg.fill ins(%c0 : bf16) outs(%e : tensor<8x768xbf16>) -> tensor<8x768xbf16>
  %g = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %r : tensor<8x768xbf16>, tensor<8xf32>) outs(%z : tensor<8x768xbf16>) {
  ^bb0(%a: bf16, %b: f32, %acc: bf16):
    %a32 = arith.extf %a : bf16 to f32
    %acc32 = arith.extf %acc : bf16 to f32
    %p = arith.mulf %a32, %b : f32
    %s = arith.addf %acc32, %p : f32
    %t = arith.truncf %s : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<8x768xbf16>
  return %g : tensor<8x768xbf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// A transposed init is read once per element too. The fill stays for the
// matmul, which accumulates into it.
// CHECK-LABEL: func.func @transposed_and_shared
// CHECK: %[[FILL:.*]] = linalg.fill
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: linalg.generic
// CHECK-SAME: outs(%[[E]] : tensor<4x4xf32>)
// CHECK: linalg.matmul
// CHECK-SAME: outs(%[[FILL]] : tensor<4x4xf32>)
func.func @transposed_and_shared(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %c1 = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%c1 : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %g = linalg.generic {indexing_maps = [#id, #t], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.mulf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %m = linalg.matmul ins(%x, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %g, %m : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A named elementwise op never reads its init: its fill is dead.
// CHECK-LABEL: func.func @named_op
// CHECK-NOT: linalg.fill
// CHECK: %[[E:.*]] = tensor.empty() : tensor<16xf32>
// CHECK: linalg.add ins(%arg0, %arg1 : tensor<16xf32>, tensor<16xf32>) outs(%[[E]] : tensor<16xf32>)
func.func @named_op(%a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %s = linalg.add ins(%a, %b : tensor<16xf32>, tensor<16xf32>) outs(%z : tensor<16xf32>) -> tensor<16xf32>
  return %s : tensor<16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Left alone: a reduction needs its init; an all-parallel op that writes
// each init element more than once (a map that is no permutation) reads
// its own earlier writes; a fill of anything but an empty tensor keeps that
// tensor's identity (an argument updated in place).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: linalg.fill
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-NEXT: ^bb0(%{{[^:]*}}: f32, %[[ACC1:[^:]*]]: f32):
// CHECK-NEXT: arith.addf %[[ACC1]]
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK-NEXT: ^bb0(%{{[^:]*}}: f32, %[[ACC2:[^:]*]]: f32):
// CHECK-NEXT: arith.addf %[[ACC2]]
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%{{[^:]*}}: f32, %[[ACC3:[^:]*]]: f32):
// CHECK-NEXT: arith.addf %[[ACC3]]
func.func @kept(%x: tensor<8x16xf32>, %arg: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %za = linalg.fill ins(%c0 : f32) outs(%arg : tensor<8x16xf32>) -> tensor<8x16xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %last = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%z2 : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %upd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%za : tensor<8x16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  return %sum, %last, %upd : tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>
}

// -----

// A fill into a fill: the inner one is dead.
// CHECK-LABEL: func.func @fill_of_fill
// CHECK: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK: %[[E:.*]] = tensor.empty(%arg0) : tensor<?xf32>
// CHECK-NEXT: %[[F:.*]] = linalg.fill ins(%[[TWO]] : f32) outs(%[[E]] : tensor<?xf32>)
// CHECK-NEXT: return %[[F]]
func.func @fill_of_fill(%n: index) -> tensor<?xf32> {
  %c1 = arith.constant 1.0 : f32
  %c2 = arith.constant 2.0 : f32
  %e = tensor.empty(%n) : tensor<?xf32>
  %f1 = linalg.fill ins(%c1 : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %f2 = linalg.fill ins(%c2 : f32) outs(%f1 : tensor<?xf32>) -> tensor<?xf32>
  return %f2 : tensor<?xf32>
}
