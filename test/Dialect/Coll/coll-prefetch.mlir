// Tests coll-prefetch: gathers start earlier, under preceding compute, but
// never past the memory limit (the original peak plus budget-mb), their
// operands, or the previous gather on their communicator; past a
// reduce-scatter only where that is faster.
// RUN: loom-opt %s -split-input-file --loom-set-target=device=h100-nvlink -coll-prefetch | FileCheck %s
// RUN: loom-opt %s -split-input-file --loom-set-target=device=cpu -coll-prefetch="overtake=false" | FileCheck %s --check-prefix=INORDER
// RUN: loom-opt %s -split-input-file --loom-set-target=device=h100-nvlink -coll-prefetch="budget-mb=1" | FileCheck %s --check-prefix=BUDGET
// RUN: loom-opt %s -split-input-file --loom-set-target=device=h100-nvlink -coll-prefetch="distance=1" | FileCheck %s --check-prefix=NEAR

// The peak is a 4 MiB temporary after the wait, so the gather may move above
// both exps, to just after the communicator.
// CHECK-LABEL: func.func @under_compute
// NEAR-LABEL: func.func @under_compute
func.func @under_compute(%s: tensor<100xf32>, %a: tensor<100xf32>, %big: tensor<1048576xf32>)
    -> (tensor<100xf32>, tensor<400xf32>, tensor<1048576xf32>) {
  // CHECK: %[[C:.+]] = coll.comm_world
  // CHECK-NEXT: coll.all_gather_start
  // CHECK-NEXT: tensor.empty
  // CHECK-NEXT: linalg.exp
  // CHECK-NEXT: linalg.exp
  // With distance=1 it moves above one op only.
  // NEAR: linalg.exp
  // NEAR-NEXT: coll.all_gather_start
  // NEAR-NEXT: linalg.exp
  %c = coll.comm_world : !coll.comm<4>
  %e = tensor.empty() : tensor<100xf32>
  %x = linalg.exp ins(%a : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
  %y = linalg.exp ins(%x : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
  %w = coll.wait %f : !coll.future<tensor<400xf32>>
  %eb = tensor.empty() : tensor<1048576xf32>
  %t = linalg.exp ins(%big : tensor<1048576xf32>) outs(%eb : tensor<1048576xf32>) -> tensor<1048576xf32>
  return %y, %w, %t : tensor<100xf32>, tensor<400xf32>, tensor<1048576xf32>
}

// -----

// Here the gathered buffer itself would raise the peak (the exps and the
// gather together exceed what the original order ever holds): nothing moves.
// CHECK-LABEL: func.func @would_raise_the_peak
func.func @would_raise_the_peak(%s: tensor<100xf32>, %a: tensor<100xf32>) -> (tensor<100xf32>, tensor<400xf32>) {
  // CHECK: linalg.exp
  // CHECK-NEXT: linalg.exp
  // CHECK-NEXT: coll.all_gather_start
  %c = coll.comm_world : !coll.comm<4>
  %e = tensor.empty() : tensor<100xf32>
  %x = linalg.exp ins(%a : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
  %y = linalg.exp ins(%x : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
  %w = coll.wait %f : !coll.future<tensor<400xf32>>
  return %y, %w : tensor<100xf32>, tensor<400xf32>
}

// -----

// The peak is a 4 MiB temporary; the 1.6 KB gather may not overlap it, so it
// moves only above the exp after it. With a 1 MiB budget it may.
// CHECK-LABEL: func.func @not_past_the_peak
// BUDGET-LABEL: func.func @not_past_the_peak
func.func @not_past_the_peak(%s: tensor<100xf32>, %a: tensor<100xf32>, %big: tensor<1048576xf32>)
    -> (tensor<100xf32>, tensor<400xf32>) {
  %c = coll.comm_world : !coll.comm<4>
  %e = tensor.empty() : tensor<1048576xf32>
  // CHECK: %[[T:.+]] = linalg.exp ins(%{{.+}} : tensor<1048576xf32>)
  // CHECK-NEXT: coll.all_gather_start
  // CHECK-NEXT: tensor.empty
  // BUDGET: coll.comm_world
  // BUDGET-NEXT: coll.all_gather_start
  %t = linalg.exp ins(%big : tensor<1048576xf32>) outs(%e : tensor<1048576xf32>) -> tensor<1048576xf32>
  %e2 = tensor.empty() : tensor<100xf32>
  %x = linalg.exp ins(%a : tensor<100xf32>) outs(%e2 : tensor<100xf32>) -> tensor<100xf32>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
  %w = coll.wait %f : !coll.future<tensor<400xf32>>
  return %x, %w : tensor<100xf32>, tensor<400xf32>
}

// -----

// Overtaking the reduce-scatter gains nothing here (the gather's wait is
// last), so the stream order stays.
// CHECK-LABEL: func.func @keeps_stream_order
func.func @keeps_stream_order(%s: tensor<100xf32>, %g: tensor<400xf32>, %a: tensor<100xf32>)
    -> (tensor<100xf32>, tensor<100xf32>, tensor<400xf32>) {
  %c = coll.comm_world : !coll.comm<4>
  // CHECK: coll.reduce_scatter_start
  // CHECK-NEXT: coll.all_gather_start
  // CHECK-NEXT: tensor.empty
  %r = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<400xf32>, !coll.comm<4>) -> !coll.future<tensor<100xf32>>
  %e = tensor.empty() : tensor<100xf32>
  %x = linalg.exp ins(%a : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
  %w = coll.wait %f : !coll.future<tensor<400xf32>>
  %rw = coll.wait %r : !coll.future<tensor<100xf32>>
  return %x, %rw, %w : tensor<100xf32>, tensor<100xf32>, tensor<400xf32>
}

// -----

// The gather's wait comes before the reduce-scatter's: it overtakes the
// reduce-scatter where that is faster, and never with overtake=false. It
// never overtakes the earlier gather.
// CHECK-LABEL: func.func @overtakes_when_faster
// INORDER-LABEL: func.func @overtakes_when_faster
func.func @overtakes_when_faster(%g0: tensor<1048576xf32>, %s0: tensor<1024xf32>, %s: tensor<1024xf32>, %big: tensor<4194304xf32>)
    -> (tensor<262144xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4194304xf32>) {
  // CHECK: %[[F0:.+]] = coll.all_gather_start %arg1
  // CHECK-NEXT: %[[F:.+]] = coll.all_gather_start %arg2
  // CHECK: coll.reduce_scatter_start
  // INORDER: coll.reduce_scatter_start
  // INORDER-NEXT: coll.all_gather_start %arg2
  %c = coll.comm_world : !coll.comm<4>
  %f0 = coll.all_gather_start %s0 on %c gather_axis = 0 : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<4096xf32>>
  %eg = tensor.empty() : tensor<1048576xf32>
  %g = linalg.exp ins(%g0 : tensor<1048576xf32>) outs(%eg : tensor<1048576xf32>) -> tensor<1048576xf32>
  %r = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<1048576xf32>, !coll.comm<4>) -> !coll.future<tensor<262144xf32>>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<4096xf32>>
  %w0 = coll.wait %f0 : !coll.future<tensor<4096xf32>>
  %w = coll.wait %f : !coll.future<tensor<4096xf32>>
  %e = tensor.empty() : tensor<4096xf32>
  %y = linalg.exp ins(%w : tensor<4096xf32>) outs(%e : tensor<4096xf32>) -> tensor<4096xf32>
  %eb = tensor.empty() : tensor<4194304xf32>
  %t = linalg.exp ins(%big : tensor<4194304xf32>) outs(%eb : tensor<4194304xf32>) -> tensor<4194304xf32>
  %rw = coll.wait %r : !coll.future<tensor<262144xf32>>
  return %rw, %w0, %y, %t : tensor<262144xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4194304xf32>
}
