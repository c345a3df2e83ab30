// Tests coll-overlap-schedule on the cpu device: a reduce-scatter's wait
// moves up to where the collective is done (freeing its input early), and a
// gather starts under the preceding compute. Compute order is unchanged.
// RUN: loom-opt %s -coll-overlap-schedule="device=cpu" | FileCheck %s
// RUN: not loom-opt %s -coll-overlap-schedule="device=none" 2>&1 | FileCheck %s --check-prefix=DEVICE
// DEVICE: error: coll-overlap-schedule: none: no device description found

// CHECK-LABEL: func.func @step
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
