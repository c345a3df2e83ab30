// Tests codegen-memory-plan: the memory timeline's buffers pinned to arena
// offsets on tensors, before bufferisation.
// RUN: loom-opt %s -split-input-file -codegen-memory-plan | FileCheck %s
// RUN: loom-opt %s -split-input-file -codegen-memory-plan=caller-owned-results=true | FileCheck %s --check-prefix=OWNED

#id = affine_map<(d0) -> (d0)>

// %a dies at %b, so %c (live with %b) takes %a's offset 0; %b sits at 256.
// The arena is the timeline's most live arena bytes (512); the timeline's
// peak adds the argument (256).
// CHECK-LABEL: func.func @reuse
// CHECK-SAME: train.arena_bound_bytes = 512 : i64, train.arena_bytes = 512 : i64, train.timeline_peak_bytes = 768 : i64
// CHECK: %[[ARENA:.+]] = memref.alloc() {alignment = 64 : i64, loom.arena} : memref<512xi8>
// CHECK: %[[C0:.+]] = arith.constant 0 : index
// CHECK: %[[V0:.+]] = memref.view %[[ARENA]][%[[C0]]][] : memref<512xi8> to memref<64xf32>
// CHECK: %[[S0:.+]] = bufferization.to_tensor %[[V0]] restrict writable
// CHECK: %[[A:.+]] = linalg.generic {{.*}} outs(%[[S0]] : tensor<64xf32>)
// CHECK: %[[C256:.+]] = arith.constant 256 : index
// CHECK: memref.view %[[ARENA]][%[[C256]]][]
// CHECK: %[[B:.+]] = linalg.generic {{.*}} ins(%[[A]] : tensor<64xf32>)
// CHECK: %[[C0B:.+]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[C0B]]][]
// CHECK: linalg.generic {{.*}} ins(%[[B]], %{{.+}} : tensor<64xf32>, tensor<64xf32>)

// With caller-owned results %c is written straight into the caller's
// buffer: it keeps its tensor.empty (for empty-tensor elimination), stays
// out of the arena, and the timeline counts it for the whole call.
// OWNED-LABEL: func.func @reuse
// OWNED-SAME: train.arena_bound_bytes = 512 : i64, train.arena_bytes = 512 : i64, train.timeline_peak_bytes = 1024 : i64
// OWNED: arith.mulf
// OWNED: %[[E:.+]] = tensor.empty() : tensor<64xf32>
// OWNED-NEXT: linalg.generic {{.*}} outs(%[[E]] : tensor<64xf32>)
// OWNED-NEXT: ^bb0
// OWNED-NEXT: arith.subf
func.func @reuse(%x: tensor<64xf32>) -> tensor<64xf32> {
  %e0 = tensor.empty() : tensor<64xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<64xf32>) outs(%e0 : tensor<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %e1 = tensor.empty() : tensor<64xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%a : tensor<64xf32>) outs(%e1 : tensor<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %e2 = tensor.empty() : tensor<64xf32>
  %c = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%b, %x : tensor<64xf32>, tensor<64xf32>) outs(%e2 : tensor<64xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %s = arith.subf %in, %in2 : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %c : tensor<64xf32>
}

// -----

// One zero fill (as CSE leaves it) is the accumulator of two matmuls. Kept
// shared, it would live across both and each matmul would copy it; each
// matmul gets its own fill instead, and each fill writes into its slot.
// CHECK-LABEL: func.func @shared_fill
// CHECK-NOT: linalg.copy
// CHECK: %[[F1:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<8x8xf32>)
// CHECK: linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<8x8xf32>, tensor<8x8xf32>) outs(%[[F1]] : tensor<8x8xf32>)
// CHECK: bufferization.to_tensor
// CHECK: %[[F2:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<8x8xf32>)
// CHECK: linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<8x8xf32>, tensor<8x8xf32>) outs(%[[F2]] : tensor<8x8xf32>)
func.func @shared_fill(%x: tensor<8x8xf32>, %y: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m1 = linalg.matmul ins(%x, %y : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m2 = linalg.matmul ins(%m1, %y : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %m2 : tensor<8x8xf32>
}

// -----

// The accumulator %acc is still read after the matmul, so the matmul cannot
// write into it: its slot gets a copy of %acc first.
// CHECK-LABEL: func.func @read_init
// CHECK: %[[ACC:.+]] = linalg.add
// CHECK: %[[SLOT:.+]] = bufferization.to_tensor %{{.+}} restrict writable : memref<8x8xf32> to tensor<8x8xf32>
// CHECK: %[[COPY:.+]] = linalg.copy ins(%[[ACC]] : tensor<8x8xf32>) outs(%[[SLOT]] : tensor<8x8xf32>)
// CHECK: %[[M:.+]] = linalg.matmul {{.*}} outs(%[[COPY]] : tensor<8x8xf32>)
// CHECK: return %[[M]], %[[ACC]]
func.func @read_init(%x: tensor<8x8xf32>, %acc0: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %acc = linalg.add ins(%acc0, %acc0 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = linalg.matmul ins(%x, %x : tensor<8x8xf32>, tensor<8x8xf32>) outs(%acc : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %m, %acc : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A collective's result buffer is live from its start to its wait; the plan
// records its offset on the start for convert-coll-to-loomrt.
// The gathered buffer is read by the add, so the add's result goes beside it.
// CHECK-LABEL: func.func @collective
// CHECK-SAME: train.arena_bytes = 8192 : i64, train.timeline_peak_bytes = 9216 : i64
// CHECK: coll.all_gather_start {{.*}} {loom.arena_offset = 0 : i64}
// CHECK: %[[C4096:.+]] = arith.constant 4096 : index
// CHECK: memref.view %{{.+}}[%[[C4096]]][] : memref<8192xi8> to memref<1024xf32>
func.func @collective(%c: !coll.comm<4>, %shard: tensor<256xf32>) -> tensor<1024xf32> {
  %f = coll.all_gather_start %shard on %c gather_axis = 0 : (tensor<256xf32>, !coll.comm<4>) -> !coll.future<tensor<1024xf32>>
  %g = coll.wait %f : !coll.future<tensor<1024xf32>>
  %e = tensor.empty() : tensor<1024xf32>
  %r = linalg.add ins(%g, %g : tensor<1024xf32>, tensor<1024xf32>) outs(%e : tensor<1024xf32>) -> tensor<1024xf32>
  return %r : tensor<1024xf32>
}

// -----

// tensor.concat (a gradient bucket) becomes insert_slices into one slot.
// CHECK-LABEL: func.func @bucket
// CHECK-NOT: tensor.concat
// CHECK: %[[SLOT:.+]] = bufferization.to_tensor %{{.+}} restrict writable : memref<96xf32> to tensor<96xf32>
// CHECK: %[[I:.+]] = tensor.insert_slice %{{.+}} into %[[SLOT]][0] [32] [1]
// CHECK: tensor.insert_slice %{{.+}} into %[[I]][32] [64] [1]
func.func @bucket(%a: tensor<32xf32>, %b: tensor<64xf32>) -> tensor<96xf32> {
  %c = tensor.concat dim(0) %a, %b : (tensor<32xf32>, tensor<64xf32>) -> tensor<96xf32>
  return %c : tensor<96xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A tensor joined from two halves, each written into its slice
// (eliminate-empty-tensors' form of RoPE's join): the joined tensor's empty
// is the slot, so both halves are written in place and the arena holds the
// joined 512 bytes (from the first half on) and the sum's 64; nothing is
// copied.
// CHECK-LABEL: func.func @joined_halves
// CHECK-SAME: train.arena_bound_bytes = 576 : i64, train.arena_bytes = 576 : i64
// CHECK: %[[V:.+]] = memref.view %{{.+}}[%{{.+}}][] : memref<576xi8> to memref<8x16xf32>
// CHECK: %[[J:.+]] = bufferization.to_tensor %[[V]] restrict writable
// CHECK: %[[S1:.+]] = tensor.extract_slice %[[J]][0, 0] [8, 8] [1, 1]
// CHECK: %[[H1:.+]] = linalg.generic {{.*}} outs(%[[S1]] : tensor<8x8xf32>)
// CHECK: %[[I1:.+]] = tensor.insert_slice %[[H1]] into %[[J]][0, 0] [8, 8] [1, 1]
// CHECK: %[[S2:.+]] = tensor.extract_slice %[[I1]][0, 8] [8, 8] [1, 1]
// CHECK: %[[H2:.+]] = linalg.generic {{.*}} outs(%[[S2]] : tensor<8x8xf32>)
// CHECK: tensor.insert_slice %[[H2]] into %[[I1]][0, 8] [8, 8] [1, 1]
// CHECK-NOT: linalg.copy
func.func @joined_halves(%x: tensor<8x8xf32>) -> tensor<f32> {
  %j = tensor.empty() : tensor<8x16xf32>
  %s1 = tensor.extract_slice %j[0, 0] [8, 8] [1, 1] : tensor<8x16xf32> to tensor<8x8xf32>
  %h1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%s1 : tensor<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.negf %in : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %i1 = tensor.insert_slice %h1 into %j[0, 0] [8, 8] [1, 1] : tensor<8x8xf32> into tensor<8x16xf32>
  %s2 = tensor.extract_slice %i1[0, 8] [8, 8] [1, 1] : tensor<8x16xf32> to tensor<8x8xf32>
  %h2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%s2 : tensor<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.exp %in : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %i2 = tensor.insert_slice %h2 into %i1[0, 8] [8, 8] [1, 1] : tensor<8x8xf32> into tensor<8x16xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %sum = linalg.reduce ins(%i2 : tensor<8x16xf32>) outs(%f : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %sum : tensor<f32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Two joins whose empty tensor CSE merged (as the backward's RoPE joins
// are): each extract, write and insert gets its own empty tensor, so both
// parts are written in place, into two slots.
// CHECK-LABEL: func.func @shared_join
// CHECK-SAME: train.arena_bytes = 1024 : i64
// CHECK-NOT: tensor.empty() : tensor<8x16xf32>
// CHECK-COUNT-2: bufferization.to_tensor %{{.+}} restrict writable : memref<8x16xf32>
// CHECK: %[[S1:.+]] = tensor.extract_slice %[[J1:[0-9]+]][0, 8] [8, 8] [1, 1]
// CHECK: linalg.generic {{.*}} outs(%[[S1]] : tensor<8x8xf32>)
// CHECK: tensor.insert_slice %{{.+}} into %[[J1]][0, 8] [8, 8] [1, 1]
// CHECK: %[[S2:.+]] = tensor.extract_slice %[[J2:[0-9]+]][0, 8] [8, 8] [1, 1]
// CHECK: linalg.generic {{.*}} outs(%[[S2]] : tensor<8x8xf32>)
// CHECK: tensor.insert_slice %{{.+}} into %[[J2]][0, 8] [8, 8] [1, 1]
// CHECK-NOT: linalg.copy
func.func @shared_join(%x: tensor<8x8xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %j = tensor.empty() : tensor<8x16xf32>
  %s1 = tensor.extract_slice %j[0, 8] [8, 8] [1, 1] : tensor<8x16xf32> to tensor<8x8xf32>
  %h1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%s1 : tensor<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.negf %in : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %i1 = tensor.insert_slice %h1 into %j[0, 8] [8, 8] [1, 1] : tensor<8x8xf32> into tensor<8x16xf32>
  %s2 = tensor.extract_slice %j[0, 8] [8, 8] [1, 1] : tensor<8x16xf32> to tensor<8x8xf32>
  %h2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%s2 : tensor<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.exp %in : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %i2 = tensor.insert_slice %h2 into %j[0, 8] [8, 8] [1, 1] : tensor<8x8xf32> into tensor<8x16xf32>
  return %i1, %i2 : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// A zero fill that is both a gradient, reduce-scattered and released, and
// read by compute (the loss does not read the parameter): the compute gets
// a fill of its own, and the release names the fill the reduce-scatter
// read.
// CHECK-LABEL: func.func @released_fill
// CHECK: %[[F:.+]] = linalg.fill
// CHECK: coll.reduce_scatter_start %[[F]]
// CHECK: %[[G:.+]] = linalg.fill
// CHECK: linalg.reduce ins(%[[G]]
// CHECK: coll.release %[[F]]
func.func @released_fill() -> (tensor<1xf32>, tensor<f32>) {
  %world = coll.comm_world : !coll.comm<4>
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s = coll.reduce_scatter_start %f on %world scatter_axis = 0 reduction = <avg>
      : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<1xf32>>
  %e0 = tensor.empty() : tensor<f32>
  %r = linalg.reduce ins(%f : tensor<4xf32>) outs(%e0 : tensor<f32>) dimensions = [0]
    (%a: f32, %b: f32) {
      %t = arith.addf %a, %b : f32
      linalg.yield %t : f32
    }
  coll.release %f : tensor<4xf32>
  %w = coll.wait %s : !coll.future<tensor<1xf32>>
  return %w, %r : tensor<1xf32>, tensor<f32>
}
