// Tests cpu-vectorize: linalg ops on buffers become loops over 1-D vectors
// along a dimension every operand reads contiguously or not at all; the
// rest stay linalg (and become scalar loops later).
// RUN: loom-opt %s -cpu-vectorize -canonicalize -cse | FileCheck %s
// RUN: loom-opt %s -cpu-vectorize=vector-bytes=32 -canonicalize -cse | FileCheck %s --check-prefix=AVX2

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// Elementwise: 16 f32 lanes along the inner dimension.
// CHECK-LABEL: func.func @add
// CHECK-SAME: loom.scalar_ops = 0 : i64, loom.vectorized_ops = 1 : i64
// CHECK: scf.for %[[I:.+]] = %c0 to %c8 step %c1
// CHECK: scf.for %[[J:.+]] = %c0 to %c64 step %c16
// CHECK: %[[A:.+]] = vector.load {{.+}} vector<16xf32>
// CHECK: %[[B:.+]] = vector.load {{.+}} vector<16xf32>
// CHECK: %[[S:.+]] = arith.addf %[[A]], %[[B]] : vector<16xf32>
// CHECK: vector.store %[[S]], {{.+}} vector<16xf32>
// CHECK-NOT: linalg.generic
// AVX2-LABEL: func.func @add
// AVX2: scf.for %{{.+}} = %c0 to %c64 step %c8
// AVX2: arith.addf {{.+}} : vector<8xf32>
func.func @add(%a: memref<8x64xf32>, %b: memref<8x64xf32>, %c: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<8x64xf32>, memref<8x64xf32>) outs(%c : memref<8x64xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}

// A row reduction: each chunk of 16 is added, in order, onto the
// accumulator (an ordered vector.reduction: the scalar loop's bits).
// CHECK-LABEL: func.func @rowsum
// CHECK: scf.for
// CHECK: scf.for %{{.+}} = %c0 to %c64 step %c16
// CHECK: %[[V:.+]] = vector.load {{.+}} vector<16xf32>
// CHECK: %[[ACC:.+]] = vector.extract
// CHECK: vector.reduction <add>, %[[V]], %[[ACC]] : vector<16xf32> into f32
// CHECK-NOT: fastmath
func.func @rowsum(%a: memref<8x64xf32>, %c: memref<8xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<8x64xf32>) outs(%c : memref<8xf32>) {
  ^bb0(%x: f32, %z: f32):
    %s = arith.addf %x, %z : f32
    linalg.yield %s : f32
  }
  return
}

// An operand that does not read the vector dimension is broadcast; math
// ops stay whole vectors.
// CHECK-LABEL: func.func @scale
// CHECK: %[[R:.+]] = vector.broadcast %{{.+}} : f32 to vector<16xf32>
// CHECK: %[[M:.+]] = arith.mulf %{{.+}}, %[[R]] : vector<16xf32>
// CHECK: math.exp %[[M]] : vector<16xf32>
func.func @scale(%a: memref<8x64xf32>, %r: memref<8xf32>, %c: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %r : memref<8x64xf32>, memref<8xf32>) outs(%c : memref<8x64xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %s = arith.mulf %x, %y : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  }
  return
}

// The vector dimension need not be the innermost loop: P @ V reduces over
// j, the last loop; d is the one all operands read contiguously. The loops
// are interchanged so that d is innermost, and the unit reduction over j
// becomes a plain add.
// CHECK-LABEL: func.func @pv
// CHECK-COUNT-3: scf.for %{{.+}} step %c1
// CHECK: scf.for %{{.+}} = %c0 to %c32 step %c16
// CHECK: %[[P:.+]] = vector.broadcast %{{.+}} : f32 to vector<16xf32>
// CHECK: %[[V:.+]] = vector.load {{.+}} vector<16xf32>
// CHECK: %[[O:.+]] = vector.load {{.+}} vector<16xf32>
// CHECK: %[[PV:.+]] = arith.mulf %[[P]], %[[V]] : vector<16xf32>
// CHECK: %[[SUM:.+]] = arith.addf %[[O]], %[[PV]] : vector<16xf32>
// CHECK: vector.store %[[SUM]]
// CHECK-NOT: vector.extract
// CHECK: return
func.func @pv(%p: memref<2x8x8xf32>, %v: memref<2x8x32xf32>, %o: memref<2x8x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, i, d, j) -> (b, i, j)>,
                                   affine_map<(b, i, d, j) -> (b, j, d)>,
                                   affine_map<(b, i, d, j) -> (b, i, d)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<2x8x8xf32>, memref<2x8x32xf32>) outs(%o : memref<2x8x32xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %z, %m : f32
    linalg.yield %s : f32
  }
  return
}

// 60 is not a multiple of 16 or 8: the widest power of two dividing it (4).
// CHECK-LABEL: func.func @fill
// CHECK: scf.for %{{.+}} = %c0 to %c60 step %c4
// CHECK: vector.store %{{.+}} : memref<4xf32, {{.+}}>, vector<4xf32>
func.func @fill(%c: memref<8x60xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<8x60xf32>)
  return
}

// f64: 8 lanes in 64 bytes.
// CHECK-LABEL: func.func @f64
// CHECK: scf.for %{{.+}} = %c0 to %c64 step %c8
// CHECK: arith.negf %{{.+}} : vector<8xf64>
func.func @f64(%a: memref<64xf64>, %c: memref<64xf64>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%a : memref<64xf64>) outs(%c : memref<64xf64>) {
  ^bb0(%x: f64, %z: f64):
    %n = arith.negf %x : f64
    linalg.yield %n : f64
  }
  return
}

// Not vectorised: a transposed read (no dimension is contiguous for both
// operands), a dimension narrower than min-lanes, a gather (a load in the
// body), and a strided view whose inner stride is not 1.
// CHECK-LABEL: func.func @transposed
// CHECK-SAME: loom.scalar_ops = 1 : i64, loom.vectorized_ops = 0 : i64
// CHECK: linalg.generic
func.func @transposed(%a: memref<64x8xf32>, %c: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<64x8xf32>) outs(%c : memref<8x64xf32>) {
  ^bb0(%x: f32, %z: f32):
    linalg.yield %x : f32
  }
  return
}

// CHECK-LABEL: func.func @narrow
// CHECK-SAME: loom.scalar_ops = 1 : i64, loom.vectorized_ops = 0 : i64
// CHECK: linalg.copy
func.func @narrow(%a: memref<16x2xf32>, %c: memref<16x2xf32>) {
  linalg.copy ins(%a : memref<16x2xf32>) outs(%c : memref<16x2xf32>)
  return
}

// CHECK-LABEL: func.func @gather
// CHECK-SAME: loom.scalar_ops = 1 : i64, loom.vectorized_ops = 0 : i64
// CHECK: linalg.generic
// CHECK: memref.load
func.func @gather(%table: memref<256x64xf32>, %ids: memref<8xi32>, %out: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ids : memref<8xi32>) outs(%out : memref<8x64xf32>) {
  ^bb0(%id: i32, %z: f32):
    %r = arith.index_cast %id : i32 to index
    %j = linalg.index 1 : index
    %v = memref.load %table[%r, %j] : memref<256x64xf32>
    linalg.yield %v : f32
  }
  return
}

// A sum over both dimensions of a transposed read: the contiguous
// dimension (i) is a reduction followed by another (j); moving it innermost
// would reorder the additions, so the op stays scalar.
// CHECK-LABEL: func.func @reorders_reduction
// CHECK-SAME: loom.scalar_ops = 1 : i64, loom.vectorized_ops = 0 : i64
func.func @reorders_reduction(%a: memref<16x16xf32>, %c: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%a : memref<16x16xf32>) outs(%c : memref<f32>) {
  ^bb0(%x: f32, %z: f32):
    %s = arith.addf %x, %z : f32
    linalg.yield %s : f32
  }
  return
}

// CHECK-LABEL: func.func @strided
// CHECK-SAME: loom.scalar_ops = 1 : i64, loom.vectorized_ops = 0 : i64
// CHECK: linalg.copy
func.func @strided(%a: memref<8x64xf32, strided<[128, 2]>>, %c: memref<8x64xf32>) {
  linalg.copy ins(%a : memref<8x64xf32, strided<[128, 2]>>) outs(%c : memref<8x64xf32>)
  return
}
