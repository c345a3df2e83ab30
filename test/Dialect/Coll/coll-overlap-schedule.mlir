// Tests coll-overlap-schedule on the cpu device (2 GB/s-class links, so
// megabyte collectives take hundreds of microseconds). Each case pins one
// rule; compute order never changes. The limit's own tests are in
// coll-overlap-schedule-limit.mlir.
// RUN: loom-opt %s -split-input-file --loom-set-target=device=cpu -coll-overlap-schedule | FileCheck %s
// RUN: loom-opt %s -split-input-file --loom-set-target=device=cpu -coll-overlap-schedule="memory-headroom=0" | FileCheck %s --check-prefix=SYNC
// RUN: not loom-opt %s -split-input-file -coll-overlap-schedule 2>&1 | FileCheck %s --check-prefix=NOTARGET
// NOTARGET: error: coll-overlap-schedule: the module has no target (train.target); run loom-set-target{device=<name>} first

// A reduce-scatter's wait moves to where the collective is done, and a
// gather starts under the preceding compute. Without headroom the gather
// stays synchronous (its 16 KiB would sit on the peak), the wait still
// moves (the peak is elsewhere).
// CHECK-LABEL: func.func @step
// SYNC-LABEL: func.func @step
// SYNC: %[[RS:.+]] = coll.reduce_scatter_start
// SYNC-NEXT: tensor.empty
// SYNC-NEXT: linalg.exp
// SYNC-NEXT: coll.wait %[[RS]]
// SYNC: %[[AG:.+]] = coll.all_gather_start
// SYNC-NEXT: coll.wait %[[AG]]
func.func @step(%g0: tensor<4096xf32>, %s: tensor<1024xf32>, %a: tensor<1048576xf32>)
    -> (tensor<1024xf32>, tensor<1048576xf32>, tensor<4096xf32>) {
  %c = coll.comm_world : !coll.comm<4>
  %e4 = tensor.empty() : tensor<4096xf32>
  // CHECK: %[[G:.+]] = linalg.exp ins(%{{.+}} : tensor<4096xf32>)
  // CHECK-NEXT: %[[RS:.+]] = coll.reduce_scatter_start %[[G]]
  %g = linalg.exp ins(%g0 : tensor<4096xf32>) outs(%e4 : tensor<4096xf32>) -> tensor<4096xf32>
  %r = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<4096xf32>, !coll.comm<4>) -> !coll.future<tensor<1024xf32>>
  // The gather moves up under the long exp (the stream is free after the
  // reduce-scatter).
  // CHECK-NEXT: %[[AG:.+]] = coll.all_gather_start
  // CHECK-NEXT: tensor.empty
  // CHECK-NEXT: %[[BIG:.+]] = linalg.exp ins(%{{.+}} : tensor<1048576xf32>)
  // The reduce-scatter is done once the long exp has run: its wait moves here.
  // CHECK-NEXT: coll.wait %[[RS]]
  %e = tensor.empty() : tensor<1048576xf32>
  %big = linalg.exp ins(%a : tensor<1048576xf32>) outs(%e : tensor<1048576xf32>) -> tensor<1048576xf32>
  %e2 = tensor.empty() : tensor<1048576xf32>
  %big2 = linalg.exp ins(%big : tensor<1048576xf32>) outs(%e2 : tensor<1048576xf32>) -> tensor<1048576xf32>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<4096xf32>>
  %w = coll.wait %f : !coll.future<tensor<4096xf32>>
  %rw = coll.wait %r : !coll.future<tensor<1024xf32>>
  return %rw, %big2, %w : tensor<1024xf32>, tensor<1048576xf32>, tensor<4096xf32>
}

// -----

// The gather moves under the matmul that precedes it: the peak (the 4 MiB
// temporary at the end) leaves room for its 1 MiB buffer there.
// CHECK-LABEL: func.func @gather_under_matmul
func.func @gather_under_matmul(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>, %s: tensor<65536xf32>, %big: tensor<1048576xf32>)
    -> (tensor<256x256xf32>, tensor<262144xf32>, tensor<1048576xf32>) {
  // CHECK: coll.comm_world
  // CHECK-NEXT: %[[F:.+]] = coll.all_gather_start
  // CHECK: linalg.matmul
  // CHECK: coll.wait %[[F]]
  // CHECK-NEXT: linalg.exp
  %c = coll.comm_world : !coll.comm<4>
  %zero = arith.constant 0.0 : f32
  %em = tensor.empty() : tensor<256x256xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%em : tensor<256x256xf32>) -> tensor<256x256xf32>
  %m = linalg.matmul ins(%a, %b : tensor<256x256xf32>, tensor<256x256xf32>) outs(%acc : tensor<256x256xf32>) -> tensor<256x256xf32>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<65536xf32>, !coll.comm<4>) -> !coll.future<tensor<262144xf32>>
  %w = coll.wait %f : !coll.future<tensor<262144xf32>>
  %e = tensor.empty() : tensor<262144xf32>
  %y = linalg.exp ins(%w : tensor<262144xf32>) outs(%e : tensor<262144xf32>) -> tensor<262144xf32>
  coll.release %w : tensor<262144xf32>
  %eb = tensor.empty() : tensor<1048576xf32>
  %t = linalg.exp ins(%big : tensor<1048576xf32>) outs(%eb : tensor<1048576xf32>) -> tensor<1048576xf32>
  return %m, %y, %t : tensor<256x256xf32>, tensor<262144xf32>, tensor<1048576xf32>
}

// -----

// A reduce-scatter starts as soon as its gradient exists, so it runs under
// the matmul; its wait, once done, sits after the matmul.
// CHECK-LABEL: func.func @reduce_scatter_at_gradient
func.func @reduce_scatter_at_gradient(%g0: tensor<262144xf32>, %a: tensor<256x256xf32>, %b: tensor<256x256xf32>, %big: tensor<1048576xf32>)
    -> (tensor<65536xf32>, tensor<256x256xf32>, tensor<1048576xf32>) {
  // CHECK: %[[G:.+]] = linalg.exp
  // CHECK-NEXT: %[[R:.+]] = coll.reduce_scatter_start %[[G]]
  // CHECK: linalg.matmul
  // CHECK-NEXT: coll.wait %[[R]]
  %c = coll.comm_world : !coll.comm<4>
  %zero = arith.constant 0.0 : f32
  %eg = tensor.empty() : tensor<262144xf32>
  %g = linalg.exp ins(%g0 : tensor<262144xf32>) outs(%eg : tensor<262144xf32>) -> tensor<262144xf32>
  %em = tensor.empty() : tensor<256x256xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%em : tensor<256x256xf32>) -> tensor<256x256xf32>
  %m = linalg.matmul ins(%a, %b : tensor<256x256xf32>, tensor<256x256xf32>) outs(%acc : tensor<256x256xf32>) -> tensor<256x256xf32>
  %r = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<262144xf32>, !coll.comm<4>) -> !coll.future<tensor<65536xf32>>
  %rw = coll.wait %r : !coll.future<tensor<65536xf32>>
  %eb = tensor.empty() : tensor<1048576xf32>
  %t = linalg.exp ins(%big : tensor<1048576xf32>) outs(%eb : tensor<1048576xf32>) -> tensor<1048576xf32>
  return %rw, %m, %t : tensor<65536xf32>, tensor<256x256xf32>, tensor<1048576xf32>
}

// -----

// The wait stalls, and deferring it past the exp would hide the
// reduce-scatter, but the 4 MiB gradient would then be live beside the
// exp's 4 MiB output: 17 MiB, over the limit (13 MiB synchronous, +5%), so
// it stays, though the input order had it deferred.
// CHECK-LABEL: func.func @wait_not_deferred_over_the_limit
func.func @wait_not_deferred_over_the_limit(%g0: tensor<1048576xf32>, %big: tensor<1048576xf32>)
    -> (tensor<262144xf32>, tensor<1048576xf32>) {
  // CHECK: %[[R:.+]] = coll.reduce_scatter_start
  // CHECK-NEXT: coll.wait %[[R]]
  // CHECK-NEXT: tensor.empty
  // CHECK-NEXT: linalg.exp
  %c = coll.comm_world : !coll.comm<4>
  %eg = tensor.empty() : tensor<1048576xf32>
  %g = linalg.exp ins(%g0 : tensor<1048576xf32>) outs(%eg : tensor<1048576xf32>) -> tensor<1048576xf32>
  %r = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<1048576xf32>, !coll.comm<4>) -> !coll.future<tensor<262144xf32>>
  %eb = tensor.empty() : tensor<1048576xf32>
  %t = linalg.exp ins(%big : tensor<1048576xf32>) outs(%eb : tensor<1048576xf32>) -> tensor<1048576xf32>
  %rw = coll.wait %r : !coll.future<tensor<262144xf32>>
  return %rw, %t : tensor<262144xf32>, tensor<1048576xf32>
}

// -----

// The gather's wait comes soon, the reduce-scatter's only at the end: the
// gather overtakes the reduce-scatter on the stream (it moves above it, to
// the top). The reduce-scatter's wait does not pass the long exp: its 4 MiB
// gradient beside the exp's 16 MiB output is over the limit.
// CHECK-LABEL: func.func @gather_overtakes_reduce_scatter
func.func @gather_overtakes_reduce_scatter(%g0: tensor<1048576xf32>, %s: tensor<1024xf32>, %big: tensor<4194304xf32>)
    -> (tensor<262144xf32>, tensor<4096xf32>, tensor<4194304xf32>) {
  // CHECK: coll.comm_world
  // CHECK-NEXT: %[[F:.+]] = coll.all_gather_start
  // CHECK: %[[R:.+]] = coll.reduce_scatter_start
  // CHECK: coll.wait %[[F]]
  // CHECK: coll.wait %[[R]]
  // CHECK-NEXT: linalg.exp ins(%arg2
  %c = coll.comm_world : !coll.comm<4>
  %eg = tensor.empty() : tensor<1048576xf32>
  %g = linalg.exp ins(%g0 : tensor<1048576xf32>) outs(%eg : tensor<1048576xf32>) -> tensor<1048576xf32>
  %r = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<1048576xf32>, !coll.comm<4>) -> !coll.future<tensor<262144xf32>>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<4096xf32>>
  %w = coll.wait %f : !coll.future<tensor<4096xf32>>
  %e = tensor.empty() : tensor<4096xf32>
  %y = linalg.exp ins(%w : tensor<4096xf32>) outs(%e : tensor<4096xf32>) -> tensor<4096xf32>
  %eb = tensor.empty() : tensor<4194304xf32>
  %t = linalg.exp ins(%big : tensor<4194304xf32>) outs(%eb : tensor<4194304xf32>) -> tensor<4194304xf32>
  %rw = coll.wait %r : !coll.future<tensor<262144xf32>>
  return %rw, %y, %t : tensor<262144xf32>, tensor<4096xf32>, tensor<4194304xf32>
}
