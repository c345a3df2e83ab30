// Tests gpu-map-linalg: each linalg op on buffers becomes a block x
// thread nest over its parallel dimensions, linearised with the innermost
// dimension fastest; reductions stay in each thread, in their order; host
// buffers move to the device.
// (No canonicalisation before the launch: it would merge the block and
// thread loops into one.)
// RUN: loom-opt %s -split-input-file -gpu-map-linalg=vector-bytes=0 -cse | FileCheck %s
// RUN: loom-opt %s -split-input-file -gpu-map-linalg="threads=128 vector-bytes=0" | FileCheck %s --check-prefix=T128
// RUN: loom-opt %s -split-input-file -gpu-map-linalg=vector-bytes=0 -convert-parallel-loops-to-gpu -canonicalize | FileCheck %s --check-prefix=LAUNCH
// RUN: loom-opt %s -split-input-file -gpu-map-linalg="block-reduce-min=0 vector-bytes=0" -cse | FileCheck %s --check-prefix=NOBLOCK
// RUN: loom-opt %s -split-input-file -gpu-map-linalg -cse | FileCheck %s --check-prefix=VEC

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// Elementwise over 4 x 96 = 384 elements: 2 blocks of 256 threads, a bound
// check, and the linear index split into (row, column).
// CHECK-LABEL: func.func @elementwise
// CHECK: scf.parallel (%[[B:.+]]) = (%c0) to (%c2) step (%c1)
// CHECK: scf.parallel (%[[T:.+]]) = (%c0) to (%c256) step (%c1)
// CHECK: %[[I:.+]] = affine.apply #{{.+}}(%[[B]], %[[T]])
// CHECK: %[[IN:.+]] = arith.cmpi ult, %[[I]], %c384
// CHECK: scf.if %[[IN]]
// CHECK: %[[R:.+]]:2 = affine.delinearize_index %[[I]] into (4, 96)
// CHECK: %[[X:.+]] = memref.load %arg0[%[[R]]#0, %[[R]]#1]
// CHECK: math.exp %[[X]]
// CHECK: memref.store {{.+}}, %arg1[%[[R]]#0, %[[R]]#1]
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = thread_x
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = block_x
// CHECK-NOT: linalg.generic
// With vectors (the default, 16 bytes): 96 threads of 4 f32 lanes, one
// aligned vector load and store each, the body once per lane.
// VEC-LABEL: func.func @elementwise
// VEC-SAME: loom.gpu_vector_kernels = 1
// VEC: scf.parallel (%{{.+}}) = (%c0) to (%c96) step (%c1)
// VEC: %[[R:.+]]:2 = affine.delinearize_index %{{.+}} into (4, 24)
// VEC: %[[C:.+]] = arith.muli %[[R]]#1, %c4
// VEC: %[[V:.+]] = vector.load %arg0[%[[R]]#0, %[[C]]] {alignment = 16 : i64} : memref<4x96xf32>, vector<4xf32>
// VEC-COUNT-4: math.exp
// VEC: %[[O:.+]] = vector.from_elements
// VEC: vector.store %[[O]], %arg1[%[[R]]#0, %[[C]]] {alignment = 16 : i64}
// T128-LABEL: func.func @elementwise
// T128: to (%c3) step
// T128: to (%c128) step
// LAUNCH-LABEL: func.func @elementwise
// LAUNCH: gpu.launch blocks({{.+}}) in ({{.+}} = %c2{{.*}}, {{.+}} = %c1{{.*}}, {{.+}} = %c1{{.*}}) threads({{.+}}) in ({{.+}} = %c256{{.*}}, {{.+}} = %c1{{.*}}, {{.+}} = %c1
func.func @elementwise(%x: memref<4x96xf32>, %y: memref<4x96xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x96xf32>) outs(%y : memref<4x96xf32>) {
  ^bb0(%a: f32, %b: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A reduction written reduction-first: the row dimension moves outside,
// one thread per row (4 rows: one block of 32), each summing its 96
// columns in order.
#kr = affine_map<(k, r) -> (r, k)>
#r = affine_map<(k, r) -> (r)>
// CHECK-LABEL: func.func @row_sum
// CHECK: scf.parallel (%{{.+}}) = (%c0) to (%c1) step (%c1)
// CHECK: scf.parallel (%{{.+}}) = (%c0) to (%c32) step (%c1)
// CHECK: %[[I:.+]] = affine.apply
// CHECK: arith.cmpi ult, %[[I]], %c4
// CHECK: scf.for %[[K:.+]] = %c0 to %c96 step %c1
// CHECK: memref.load %arg0[%[[I]], %[[K]]]
// CHECK: arith.addf
// CHECK: memref.store {{.+}}, %arg1[%[[I]]]
func.func @row_sum(%x: memref<4x96xf32>, %s: memref<4xf32>) {
  linalg.generic {indexing_maps = [#kr, #r], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<4x96xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %a, %acc : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// No parallel dimension: one thread runs the whole reduction.
// CHECK-LABEL: func.func @total
// CHECK: scf.parallel (%{{.+}}) = (%c0) to (%c1) step (%c1)
// CHECK: scf.parallel (%{{.+}}) = (%c0) to (%c32) step (%c1)
// CHECK: arith.cmpi ult, %{{.+}}, %c1
// CHECK: scf.for %{{.+}} = %c0 to %c8 step %c1
func.func @total(%x: memref<8xf32>, %s: memref<f32>) {
  linalg.reduce ins(%x : memref<8xf32>) outs(%s : memref<f32>) dimensions = [0]
  (%a: f32, %acc: f32) {
    %t = arith.addf %a, %acc : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// The arena moves to the device in stream order; a copy becomes a kernel.
// CHECK-LABEL: func.func @buffers
// CHECK: %[[W:.+]] = gpu.wait async
// CHECK: %[[M:.+]], %[[T:.+]] = gpu.alloc async [%[[W]]] () : memref<1024xi8>
// CHECK: gpu.wait [%[[T]]]
// CHECK: %[[V:.+]] = memref.view %[[M]]
// CHECK: scf.parallel
// CHECK: memref.load %arg0
// CHECK: memref.store {{.+}}, %[[V]]
// CHECK: gpu.dealloc async [%{{.+}}] %[[M]]
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
func.func @buffers(%x: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %arena = memref.alloc() : memref<1024xi8>
  %v = memref.view %arena[%c0][] : memref<1024xi8> to memref<16xf32>
  memref.copy %x, %v : memref<16xf32> to memref<16xf32>
  memref.dealloc %arena : memref<1024xi8>
  return
}

// -----

#id = affine_map<(i, j) -> (i, j)>
// The embedding gradient's scatter-add: the host loop reads token ids, so it
// runs inside the kernel of the row update, one thread per column, adding
// repeated ids in order.
// CHECK-LABEL: func.func @scatter_add
// CHECK: scf.parallel
// CHECK: scf.parallel (%{{.+}}) = (%c0) to (%c64) step (%c1)
// CHECK: %[[J:.+]] = affine.apply
// CHECK: scf.if
// CHECK: scf.for %[[T:.+]] = %c0 to %c8 step %c1
// CHECK: %[[ID:.+]] = memref.load %arg0[%[[T]]]
// CHECK: memref.subview %arg2[{{.+}}, 0] [1, 64]
// CHECK: memref.load %{{.+}}[%c0, %[[J]]]
// CHECK: arith.addf
func.func @scatter_add(%ids: memref<8xi32>, %dy: memref<8x64xf32>, %dw: memref<16x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %t = %c0 to %c8 step %c1 {
    %id = memref.load %ids[%t] : memref<8xi32>
    %i = arith.index_cast %id : i32 to index
    %dst = memref.subview %dw[%i, 0] [1, 64] [1, 1] : memref<16x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    %src = memref.subview %dy[%t, 0] [1, 64] [1, 1] : memref<8x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%src : memref<1x64xf32, strided<[64, 1], offset: ?>>) outs(%dst : memref<1x64xf32, strided<[64, 1], offset: ?>>) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %b, %a : f32
      linalg.yield %s : f32
    }
  }
  return
}


// -----

// A long row reduction along the contiguous dimension: a block per row,
// threads striding along it from the neutral element (thread 0 from the
// output), combined by the block (scf.reduce, a gpu.all_reduce once
// mapped), stored once reduced. Its operands span 16,448 bytes: the 8 x 512
// input, and the 8 outputs read (by thread 0) and written.
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @sum_of_squares
// CHECK-SAME: loom.gpu_block_reductions = 1 : i64, loom.gpu_kernel_bytes = 16448 : i64, loom.gpu_kernels = 1 : i64
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: scf.parallel (%[[ROW:.+]]) = (%c0) to (%c8) step (%c1)
// CHECK: %[[S:.+]] = scf.parallel (%[[T:.+]]) = (%c0) to (%c256) step (%c1) init (%[[ZERO]]) -> f32
// CHECK: %[[FIRST:.+]] = arith.cmpi eq, %[[T]], %c0
// CHECK: %[[OLD:.+]] = memref.load %arg1[%[[ROW]]]
// CHECK: %[[START:.+]] = arith.select %[[FIRST]], %[[OLD]], %[[ZERO]]
// CHECK: %[[P:.+]] = scf.for %[[K:.+]] = %[[T]] to %c512 step %c256 iter_args(%[[A:.+]] = %[[START]])
// CHECK: %[[X:.+]] = memref.load %arg0[%[[ROW]], %[[K]]]
// CHECK: %[[SQ:.+]] = arith.mulf %[[X]], %[[X]]
// CHECK: arith.addf %[[A]], %[[SQ]]
// CHECK: scf.reduce(%[[P]] : f32)
// CHECK: arith.addf
// CHECK: scf.reduce.return
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = thread_x
// CHECK: memref.store %[[S]], %arg1[%[[ROW]]]
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = block_x
// With vectors: 128 threads each load 4 consecutive f32 of the row at a
// time and fold them in order.
// VEC-LABEL: func.func @sum_of_squares
// VEC-SAME: loom.gpu_block_reductions = 1
// VEC-SAME: loom.gpu_vector_kernels = 1
// VEC: scf.parallel (%[[T:.+]]) = (%c0) to (%c128) step (%c1) init
// VEC: %[[FROM:.+]] = arith.muli %[[T]], %c4
// VEC: scf.for %[[K:.+]] = %[[FROM]] to %c512 step %c512
// VEC: vector.load %arg0[%{{.+}}, %[[K]]] {alignment = 16 : i64} : memref<8x512xf32>, vector<4xf32>
// VEC-COUNT-4: arith.addf
// VEC: scf.reduce
// LAUNCH-LABEL: func.func @sum_of_squares
// LAUNCH: gpu.launch
// LAUNCH: gpu.all_reduce
// LAUNCH: arith.addf
// NOBLOCK-LABEL: func.func @sum_of_squares
// NOBLOCK-SAME: loom.gpu_block_reductions = 0
// NOBLOCK: scf.for %{{.+}} = %c0 to %c512 step %c1
// NOBLOCK-NOT: scf.reduce(
func.func @sum_of_squares(%x: memref<8x512xf32>, %s: memref<8xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x512xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %t = arith.addf %acc, %sq : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A max over the last of three dimensions: the two outer ones are split
// from the block index; 200 elements take 224 threads (whole warps) from
// -inf.
// CHECK-LABEL: func.func @row_max
// CHECK-DAG: %[[NEG:.+]] = arith.constant 0xFF800000 : f32
// CHECK: scf.parallel (%[[B:.+]]) = (%c0) to (%c6) step (%c1)
// CHECK: %[[R:.+]]:2 = affine.delinearize_index %[[B]] into (2, 3)
// CHECK: scf.parallel (%{{.+}}) = (%c0) to (%c224) step (%c1) init (%[[NEG]]) -> f32
// CHECK: memref.load %arg0[%[[R]]#0, %[[R]]#1, %{{.+}}]
// CHECK: arith.maximumf
// CHECK: scf.reduce
// CHECK: arith.maximumf
func.func @row_max(%x: memref<2x3x200xf32>, %s: memref<2x3xf32>) {
  linalg.reduce ins(%x : memref<2x3x200xf32>) outs(%s : memref<2x3xf32>) dimensions = [2]
  (%a: f32, %acc: f32) {
    %t = arith.maximumf %a, %acc : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A column sum over 512 rows into 64 outputs (a norm's weight gradient): a
// thread per column would be a fraction of one block, so each column gets a
// block whose threads stride down the rows, though the loads do not coalesce.
// (On the CUDA target gpu-split-reduction splits such sums first; see
// @split_partials.)
#tj0 = affine_map<(t, j) -> (t, j)>
#j0 = affine_map<(t, j) -> (j)>
// CHECK-LABEL: func.func @column_sum_few
// CHECK-SAME: loom.gpu_block_reductions = 2 : i64, loom.gpu_kernel_bytes = 230656 : i64, loom.gpu_kernels = 2 : i64
// CHECK: scf.parallel (%[[COL:.*]]) = (%c0) to (%c64) step (%c1)
// CHECK: scf.parallel (%[[T:.*]]) = (%c0) to (%c256) step (%c1) init
// CHECK: scf.for %[[ROW:.*]] = %[[T]] to %c512 step %c256
// CHECK: memref.load %{{.*}}[%[[ROW]], %[[COL]]]
// CHECK: scf.reduce(
// A sum over two dimensions (batch and sequence) runs as one reduction of
// 4 x 64 elements, each thread's position split into the two indices.
// CHECK: scf.parallel (%[[COL2:.*]]) = (%c0) to (%c96) step (%c1)
// CHECK: scf.parallel (%[[T2:.*]]) = (%c0) to (%c256) step (%c1) init
// CHECK: scf.for %[[K:.*]] = %[[T2]] to %c256 step %c256
// CHECK: %[[BS:.*]]:2 = affine.delinearize_index %[[K]] into (4, 64)
// CHECK: memref.load %{{.*}}[%[[BS]]#0, %[[BS]]#1, %[[COL2]]]
// CHECK: scf.reduce(
func.func @column_sum_few(%x: memref<512x64xf32>, %c: memref<64xf32>,
                          %y: memref<4x64x96xf32>, %g: memref<96xf32>) {
  linalg.generic {indexing_maps = [#tj0, #j0], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<512x64xf32>) outs(%c : memref<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  }
  linalg.reduce ins(%y : memref<4x64x96xf32>) outs(%g : memref<96xf32>) dimensions = [0, 1]
  (%a: f32, %acc: f32) {
    %t = arith.addf %a, %acc : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// Not a block reduction: a column sum into more outputs than 128 blocks of
// threads (threads across columns read neighbours, and the GPU is full), a
// short row (under 128), and two results.
#tj = affine_map<(t, j) -> (t, j)>
#j = affine_map<(t, j) -> (j)>
#ij2 = affine_map<(i, j) -> (i, j)>
#i2 = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @not_block
// CHECK-SAME: loom.gpu_block_reductions = 0 : i64, loom.gpu_kernel_bytes = 67455424 : i64, loom.gpu_kernels = 3 : i64
// CHECK-NOT: scf.reduce(
func.func @not_block(%x: memref<512x32800xf32>, %c: memref<32800xf32>, %y: memref<8x64xf32>,
                     %r: memref<8xf32>, %z: memref<8x512xf32>, %m: memref<8xf32>, %n: memref<8xf32>) {
  linalg.generic {indexing_maps = [#tj, #j], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<512x32800xf32>) outs(%c : memref<32800xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#ij2, #i2], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<8x64xf32>) outs(%r : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#ij2, #i2, #i2], iterator_types = ["parallel", "reduction"]}
      ins(%z : memref<8x512xf32>) outs(%m, %n : memref<8xf32>, memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32, %acc2: f32):
    %t = arith.addf %acc, %a : f32
    %u = arith.maximumf %acc2, %a : f32
    linalg.yield %t, %u : f32, f32
  }
  return
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// bf16 in, f32 out: 4 lanes (16 bytes of the f32 output, 8 of the bf16
// input); the per-row operand is one scalar for all lanes.
// VEC-LABEL: func.func @mixed
// VEC-SAME: loom.gpu_vector_kernels = 1
// VEC: vector.load %arg0{{.*}} {alignment = 8 : i64} : memref<8x64xbf16>, vector<4xbf16>
// VEC: memref.load %arg1[
// VEC-COUNT-4: arith.extf
// VEC: vector.store {{.*}} {alignment = 16 : i64} : memref<8x64xf32>, vector<4xf32>
func.func @mixed(%x: memref<8x64xbf16>, %s: memref<8xf32>, %y: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<8x64xbf16>, memref<8xf32>) outs(%y : memref<8x64xf32>) {
  ^bb0(%a: bf16, %b: f32, %o: f32):
    %e = arith.extf %a : bf16 to f32
    %m = arith.mulf %e, %b : f32
    linalg.yield %m : f32
  }
  return
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>

// A thread per element: rows of 6 (not a multiple of 4 lanes), a view
// whose offset (1) breaks the alignment, and a transposed read.
// VEC-LABEL: func.func @scalar
// VEC-SAME: loom.gpu_vector_kernels = 0
// VEC-NOT: vector.load
func.func @scalar(%x: memref<4x6xf32>, %y: memref<4x6xf32>, %big: memref<4x9xf32>,
                  %z: memref<4x8xf32>, %sq: memref<8x8xf32>, %w: memref<8x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x6xf32>) outs(%y : memref<4x6xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  %v = memref.subview %big[0, 1] [4, 8] [1, 1] : memref<4x9xf32> to memref<4x8xf32, strided<[9, 1], offset: 1>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v : memref<4x8xf32, strided<[9, 1], offset: 1>>) outs(%z : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sq : memref<8x8xf32>) outs(%w : memref<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

#rk = affine_map<(r, k) -> (r, k)>
#r = affine_map<(r, k) -> (r)>

// A bf16 accumulator (codegen-widen-compute off) keeps a thread per row: warp
// shuffles move 32-bit words.
// CHECK-LABEL: func.func @bf16_row_sum
// CHECK-SAME: loom.gpu_block_reductions = 0
// CHECK: scf.for
func.func @bf16_row_sum(%x: memref<8x512xbf16>, %y: memref<8xbf16>) {
  linalg.generic {indexing_maps = [#rk, #r], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x512xbf16>) outs(%y : memref<8xbf16>) {
  ^bb0(%a: bf16, %acc: bf16):
    %s = arith.addf %acc, %a : bf16
    linalg.yield %s : bf16
  }
  return
}

// -----

// A fill stores vectors of its scalar; a body that reads its loop indices
// (RoPE's tables) gets each lane's own index, the thread's plus the lane.
// VEC-LABEL: func.func @fill_and_index
// VEC-SAME: loom.gpu_vector_kernels = 2
// VEC: %[[Z:.+]] = arith.constant dense<0.000000e+00> : vector<4xf32>
// VEC: vector.store %[[Z]], %arg0
// VEC: %[[C:.+]] = arith.muli %{{.+}}, %c4
// VEC: %[[L1:.+]] = arith.addi %[[C]], %c1
// VEC: arith.muli %{{.+}}#0, %[[L1]]
// VEC: vector.store {{.*}}, %arg1
func.func @fill_and_index(%a: memref<16x64xf32>, %t: memref<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%a : memref<16x64xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%t : memref<8x32xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ij = arith.muli %i, %j : index
    %n = arith.index_cast %ij : index to i64
    %f = arith.sitofp %n : i64 to f32
    linalg.yield %f : f32
  }
  return
}

// -----

// gpu-split-reduction's partials of a norm's weight gradient: 8 partials
// of 64 columns, each folding 2 x 4 rows of two bf16 inputs and a per-row
// f32 scale. Four columns a thread (16 bytes of the f32 partials): the
// partials' lanes are loaded before the reduction loops and carried
// through them, each row's inputs are one vector load each and the scale
// one scalar, every lane folds its rows in the CPU's order, and one vector
// store writes the lanes. The innermost loop (4 rows) is unrolled whole.
#in4 = affine_map<(b, s, k, c) -> (b, s, k, c)>
#row4 = affine_map<(b, s, k, c) -> (b, s, k)>
#part4 = affine_map<(b, s, k, c) -> (s, c)>
// VEC-LABEL: func.func @split_partials
// VEC-SAME: loom.gpu_vector_kernels = 1
// VEC: scf.parallel (%{{.+}}) = (%c0) to (%c128) step (%c1)
// VEC: %[[R:.+]]:2 = affine.delinearize_index %{{.+}} into (8, 16)
// VEC: %[[C:.+]] = arith.muli %[[R]]#1, %c4
// VEC: %[[P:.+]] = vector.load %arg3[%[[R]]#0, %[[C]]] {alignment = 16 : i64} : memref<8x64xf32>, vector<4xf32>
// VEC: %[[P0:.+]] = vector.extract %[[P]][0]
// VEC: %[[OUT:.+]]:4 = scf.for %[[B:.+]] = %c0 to %c2 step %c1 iter_args(%[[A0:.+]] = %[[P0]], %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}})
// VEC-NOT: scf.for
// VEC: vector.load %arg0[%[[B]], %[[R]]#0, %c0, %[[C]]] {alignment = 8 : i64} : memref<2x8x4x64xbf16>, vector<4xbf16>
// VEC: vector.load %arg1[%[[B]], %[[R]]#0, %c0, %[[C]]] {alignment = 8 : i64} : memref<2x8x4x64xbf16>, vector<4xbf16>
// VEC: memref.load %arg2[%[[B]], %[[R]]#0, %c0]
// VEC: %[[S0:.+]] = arith.addf %[[A0]], %{{.+}} : f32
// VEC-COUNT-3: arith.addf
// VEC: vector.load %arg0[%[[B]], %[[R]]#0, %c1, %[[C]]]
// VEC: %[[S1:.+]] = arith.addf %[[S0]], %{{.+}} : f32
// VEC: vector.load %arg0[%[[B]], %[[R]]#0, %c3, %[[C]]]
// VEC: %[[S3:.+]] = arith.addf %{{.+}}, %{{.+}} : f32
// VEC-COUNT-3: arith.addf
// VEC: scf.yield %[[S3]],
// VEC: %[[V:.+]] = vector.from_elements %[[OUT]]#0, %[[OUT]]#1, %[[OUT]]#2, %[[OUT]]#3
// VEC: vector.store %[[V]], %arg3[%[[R]]#0, %[[C]]] {alignment = 16 : i64}
func.func @split_partials(%dy: memref<2x8x4x64xbf16>, %x: memref<2x8x4x64xbf16>,
                          %rstd: memref<2x8x4xf32>, %p: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [#in4, #in4, #row4, #part4],
                  iterator_types = ["reduction", "parallel", "reduction", "parallel"]}
      ins(%dy, %x, %rstd : memref<2x8x4x64xbf16>, memref<2x8x4x64xbf16>, memref<2x8x4xf32>)
      outs(%p : memref<8x64xf32>) {
  ^bb0(%g: bf16, %v: bf16, %s: f32, %acc: f32):
    %g32 = arith.extf %g : bf16 to f32
    %v32 = arith.extf %v : bf16 to f32
    %m = arith.mulf %g32, %v32 : f32
    %n = arith.mulf %m, %s : f32
    %a = arith.addf %acc, %n : f32
    linalg.yield %a : f32
  }
  return
}

// -----

// A reduction whose body never reads the output (the last row wins) keeps
// a thread per output: there is nothing to carry.
// VEC-LABEL: func.func @last_row
// VEC-SAME: loom.gpu_vector_kernels = 0
// VEC: scf.for
// VEC-NOT: vector.load
func.func @last_row(%x: memref<16x64xf32>, %y: memref<64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<16x64xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// The partials' fill of zeros right before them: one kernel, whose lanes
// start from the fill's value instead of loading the partials (five ops,
// four kernels). The 64-row loops are unrolled by 8. A fill with a read of its buffer in between stays a
// kernel of its own.
#in2 = affine_map<(t, c) -> (t, c)>
#col2 = affine_map<(t, c) -> (c)>
// VEC-LABEL: func.func @fill_taken
// VEC-SAME: loom.gpu_kernels = 4
// VEC-SAME: loom.gpu_vector_kernels = 4
// VEC: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// VEC: scf.for %{{.+}} = %c0 to %c64 step %c8 iter_args(%{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]])
// VEC: vector.store %{{.+}}, %arg1
// The second fill: its own kernel, then the copy that reads it, then the sum
// from the buffer's lanes.
// VEC: vector.store %{{.+}}, %arg3
// VEC: vector.load %arg3
// VEC: vector.store %{{.+}}, %arg4
// VEC: %[[P:.+]] = vector.load %arg3
// VEC: %[[P0:.+]] = vector.extract %[[P]][0]
// VEC: scf.for %{{.+}} = %c0 to %c64 step %c8 iter_args(%{{.+}} = %[[P0]],
func.func @fill_taken(%x: memref<64x32xf32>, %p: memref<32xf32>, %y: memref<64x32xf32>,
                      %q: memref<32xf32>, %seen: memref<32xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%p : memref<32xf32>)
  linalg.generic {indexing_maps = [#in2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<64x32xf32>) outs(%p : memref<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%q : memref<32xf32>)
  linalg.copy ins(%q : memref<32xf32>) outs(%seen : memref<32xf32>)
  linalg.generic {indexing_maps = [#in2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%y : memref<64x32xf32>) outs(%q : memref<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A column sum over 8 rows: its one loop unrolled whole, the stored lanes
// are the last row's sums.
// VEC-LABEL: func.func @short_columns
// VEC-SAME: loom.gpu_vector_kernels = 1
// VEC: %[[P:.+]] = vector.load %arg1
// VEC-NOT: scf.for
// VEC: vector.load %arg0[%c7,
// VEC: %[[L0:.+]] = arith.addf
// VEC: %[[L1:.+]] = arith.addf
// VEC: %[[L2:.+]] = arith.addf
// VEC: %[[L3:.+]] = arith.addf
// VEC: %[[V:.+]] = vector.from_elements %[[L0]], %[[L1]], %[[L2]], %[[L3]]
// VEC: vector.store %[[V]], %arg1
func.func @short_columns(%x: memref<8x64xf32>, %y: memref<64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<8x64xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Every reduction takes over the fill of its output right before it: a
// block per row starts thread 0 from the fill's value instead of loading
// the output; a thread per row (NOBLOCK) stores it before its loop; so does
// the one thread of a reduction into a scalar. One kernel each, no fill;
// neither reads its output (16,384 + 32 + 32 + 4 bytes).
#id3 = affine_map<(i, j) -> (i, j)>
#row3 = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @fills_taken
// CHECK-SAME: loom.gpu_block_reductions = 1 : i64, loom.gpu_kernel_bytes = 16452 : i64, loom.gpu_kernels = 2 : i64
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[SEED:.+]] = arith.constant 2.500000e-01 : f32
// CHECK: scf.parallel (%[[T:.+]]) = (%c0) to (%c256) step (%c1) init (%[[ZERO]]) -> f32
// CHECK: %[[FIRST:.+]] = arith.cmpi eq, %[[T]], %c0
// CHECK-NOT: memref.load %arg1
// CHECK: arith.select %[[FIRST]], %[[SEED]], %[[ZERO]]
// CHECK: memref.store %{{.+}}, %arg1
// CHECK: arith.cmpi ult, %{{.+}}, %c1
// CHECK: memref.store %[[SEED]], %arg2[]
// CHECK-NEXT: scf.for %{{.+}} = %c0 to %c8 step %c1
// NOBLOCK-LABEL: func.func @fills_taken
// NOBLOCK-SAME: loom.gpu_block_reductions = 0 : i64, loom.gpu_kernel_bytes = {{[0-9]+}} : i64, loom.gpu_kernels = 2 : i64
// NOBLOCK: %[[SEED:.+]] = arith.constant 2.500000e-01 : f32
// NOBLOCK: %[[I:.+]] = affine.apply
// NOBLOCK: arith.cmpi ult, %[[I]], %c8
// NOBLOCK: memref.store %[[SEED]], %arg1[%[[I]]]
// NOBLOCK-NEXT: scf.for %{{.+}} = %c0 to %c512 step %c1
// NOBLOCK-NOT: linalg.fill
func.func @fills_taken(%x: memref<8x512xf32>, %s: memref<8xf32>, %t: memref<f32>) {
  %seed = arith.constant 0.25 : f32
  linalg.fill ins(%seed : f32) outs(%s : memref<8xf32>)
  linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x512xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %r = arith.addf %acc, %sq : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%seed : f32) outs(%t : memref<f32>)
  linalg.reduce ins(%s : memref<8xf32>) outs(%t : memref<f32>) dimensions = [0]
  (%a: f32, %acc: f32) {
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  }
  return
}
