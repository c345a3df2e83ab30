// Tests loom-schedule-pipeline: the passes it runs, in order, with the shared
// options forwarded; the passes it leaves out when their option turns them
// off; and a run on a step where every stage has work.
// Bucketing is off by default (bucket-mb=0).
// RUN: loom-opt %s --loom-set-target=device=cpu --loom-schedule-pipeline="gather-budget-mb=1 bucket-mb=25 memory-headroom=0.1 distance=50" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPE
// RUN: loom-opt %s --loom-set-target=device=h100-nvlink --loom-schedule-pipeline --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=LEAN
// RUN: loom-opt %s --loom-set-target=device=cpu --loom-schedule-pipeline="bucket-mb=25" | FileCheck %s

// The passes take their device from the module's target, not an option.
// PIPE: loom-set-target{device=cpu profile=}
// PIPE: zero-selective-gather{budget-mb=1.000000e+00}
// PIPE: coll-bucket{bucket-mb=2.500000e+01 first-bucket-mb=1.000000e+00}
// PIPE-NOT: coll-prefetch
// PIPE: coll-overlap-schedule{distance=50 memory-headroom=1.000000e-01 memory-limit-mb=0.000000e+00 synchronous-below-floor=false}

// LEAN-NOT: zero-selective-gather
// LEAN-NOT: coll-bucket
// LEAN: func.func(
// LEAN-NEXT: coll-overlap-schedule{distance=200 memory-headroom=5.000000e-02

// Two small gradients bucket into one reduce-scatter that starts after the
// second; the gather overtakes it and starts at the top, and the bucket runs
// under the long exp.
// CHECK-LABEL: func.func @step
// CHECK: coll.comm_world
// CHECK-NEXT: %[[F:.+]] = coll.all_gather_start
// CHECK: %[[B:.+]] = coll.reduce_scatter_start %{{.+}} on %{{.+}} scatter_axis = 0 reduction = <avg> : (tensor<2048xf32>
// CHECK: coll.wait %[[F]]
// CHECK-NOT: coll.reduce_scatter_start
// CHECK: coll.wait %[[B]]
func.func @step(%g0: tensor<1024xf32>, %g1: tensor<1024xf32>, %s: tensor<1024xf32>, %big: tensor<4194304xf32>)
    -> (tensor<256xf32>, tensor<256xf32>, tensor<4096xf32>, tensor<4194304xf32>) {
  %c = coll.comm_world : !coll.comm<4>
  %e0 = tensor.empty() : tensor<1024xf32>
  %a = linalg.exp ins(%g0 : tensor<1024xf32>) outs(%e0 : tensor<1024xf32>) -> tensor<1024xf32>
  %r0 = coll.reduce_scatter_start %a on %c scatter_axis = 0 reduction = <avg> : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<256xf32>>
  %e1 = tensor.empty() : tensor<1024xf32>
  %b = linalg.exp ins(%g1 : tensor<1024xf32>) outs(%e1 : tensor<1024xf32>) -> tensor<1024xf32>
  %r1 = coll.reduce_scatter_start %b on %c scatter_axis = 0 reduction = <avg> : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<256xf32>>
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<4096xf32>>
  %w = coll.wait %f : !coll.future<tensor<4096xf32>>
  %e = tensor.empty() : tensor<4096xf32>
  %y = linalg.exp ins(%w : tensor<4096xf32>) outs(%e : tensor<4096xf32>) -> tensor<4096xf32>
  %eb = tensor.empty() : tensor<4194304xf32>
  %t = linalg.exp ins(%big : tensor<4194304xf32>) outs(%eb : tensor<4194304xf32>) -> tensor<4194304xf32>
  %w0 = coll.wait %r0 : !coll.future<tensor<256xf32>>
  %w1 = coll.wait %r1 : !coll.future<tensor<256xf32>>
  return %w0, %w1, %y, %t : tensor<256xf32>, tensor<256xf32>, tensor<4096xf32>, tensor<4194304xf32>
}
