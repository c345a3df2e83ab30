// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(codegen-share-index-generics))' --split-input-file | FileCheck %s
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(codegen-share-index-generics{max-bytes=64}))' --split-input-file | FileCheck %s --check-prefix=SMALL

#id = affine_map<(t, i) -> (t, i)>

// Two rope ops' cos tables: the second reads the first. The sin table and
// a cos table of another type are tables of their own.
// CHECK-LABEL: func.func @tables
// CHECK: %[[COS:.*]] = linalg.generic
// CHECK: math.cos
// CHECK: %[[SIN:.*]] = linalg.generic
// CHECK: math.sin
// CHECK: %[[COS16:.*]] = linalg.generic
// CHECK: math.cos
// CHECK-NOT: linalg.generic
// CHECK: return %[[COS]], %[[SIN]], %[[COS]], %[[COS16]]
// SMALL-LABEL: func.func @tables
// SMALL-COUNT-4: linalg.generic
func.func @tables() -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf16>) {
  %e1 = tensor.empty() : tensor<8x4xf32>
  %c1 = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%e1 : tensor<8x4xf32>) {
  ^bb0(%o: f32):
    %t = linalg.index 0 : index
    %i = linalg.index 1 : index
    %p = arith.muli %t, %i : index
    %n = arith.index_cast %p : index to i64
    %f = arith.sitofp %n : i64 to f32
    %r = math.cos %f : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  %e2 = tensor.empty() : tensor<8x4xf32>
  %s1 = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%e2 : tensor<8x4xf32>) {
  ^bb0(%o: f32):
    %t = linalg.index 0 : index
    %i = linalg.index 1 : index
    %p = arith.muli %t, %i : index
    %n = arith.index_cast %p : index to i64
    %f = arith.sitofp %n : i64 to f32
    %r = math.sin %f : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  %e3 = tensor.empty() : tensor<8x4xf32>
  %c2 = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%e3 : tensor<8x4xf32>) {
  ^bb0(%o: f32):
    %t = linalg.index 0 : index
    %i = linalg.index 1 : index
    %p = arith.muli %t, %i : index
    %n = arith.index_cast %p : index to i64
    %f = arith.sitofp %n : i64 to f32
    %r = math.cos %f : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  %e4 = tensor.empty() : tensor<8x4xf16>
  %c3 = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%e4 : tensor<8x4xf16>) {
  ^bb0(%o: f16):
    %t = linalg.index 0 : index
    %i = linalg.index 1 : index
    %p = arith.muli %t, %i : index
    %n = arith.index_cast %p : index to i64
    %f = arith.sitofp %n : i64 to f16
    %r = math.cos %f : f16
    linalg.yield %r : f16
  } -> tensor<8x4xf16>
  return %c1, %s1, %c2, %c3 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf16>
}

// -----

#id = affine_map<(i) -> (i)>

// Not tables: a generic reading an input, one whose init holds values, and
// two bodies that read different values from above.
// CHECK-LABEL: func.func @not_tables
// CHECK-COUNT-4: linalg.generic
func.func @not_tables(%x: tensor<8xf32>, %a: f32, %b: f32) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %r2 = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]}
      outs(%x : tensor<8xf32>) {
  ^bb0(%o: f32):
    linalg.yield %a : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %r3 = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]}
      outs(%e2 : tensor<8xf32>) {
  ^bb0(%o: f32):
    linalg.yield %a : f32
  } -> tensor<8xf32>
  %e3 = tensor.empty() : tensor<8xf32>
  %r4 = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]}
      outs(%e3 : tensor<8xf32>) {
  ^bb0(%o: f32):
    linalg.yield %b : f32
  } -> tensor<8xf32>
  return %r1, %r2, %r3, %r4 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
