// Tests the baseline orders: synchronous, PyTorch FSDP's, waits sunk to
// their first use, and gathers hoisted as far as their operands allow
// (keeping their order).
// RUN: loom-opt %s -split-input-file -coll-reorder-baseline=policy=original | FileCheck %s --check-prefix=ORIGINAL
// RUN: loom-opt %s -split-input-file -coll-reorder-baseline=policy=synchronous | FileCheck %s --check-prefix=SYNC
// RUN: loom-opt %s -split-input-file -coll-reorder-baseline=policy=fsdp | FileCheck %s --check-prefix=FSDP
// RUN: loom-opt %s -split-input-file -coll-reorder-baseline=policy=sink-waits | FileCheck %s --check-prefix=SINK
// RUN: loom-opt %s -split-input-file -coll-reorder-baseline=policy=eager-prefetch | FileCheck %s --check-prefix=EAGER
// RUN: not loom-opt %s -split-input-file -coll-reorder-baseline=policy=random 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: coll-reorder-baseline: expected policy original, synchronous, fsdp, sink-waits or eager-prefetch, got 'random'

func.func @f(%s: tensor<4xf32>, %t: tensor<4xf32>, %a: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %c = coll.comm_world : !coll.comm<4>
  %x = math.exp %a : tensor<16xf32>
  %f1 = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %w1 = coll.wait %f1 : !coll.future<tensor<16xf32>>
  %y = math.exp %x : tensor<16xf32>
  %u1 = arith.addf %w1, %y : tensor<16xf32>
  %f2 = coll.all_gather_start %t on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %w2 = coll.wait %f2 : !coll.future<tensor<16xf32>>
  %u2 = arith.addf %w2, %u1 : tensor<16xf32>
  return %u1, %u2 : tensor<16xf32>, tensor<16xf32>
}

// ORIGINAL: math.exp
// ORIGINAL-NEXT: coll.all_gather_start
// ORIGINAL-NEXT: coll.wait

// The first wait moves below the second exp, to just before its use.
// SINK: %[[F1:.+]] = coll.all_gather_start
// SINK-NEXT: math.exp
// SINK-NEXT: %[[W1:.+]] = coll.wait %[[F1]]
// SINK-NEXT: arith.addf %[[W1]]

// Both gathers start right after the communicator, in their original order.
// EAGER: %[[C:.+]] = coll.comm_world
// EAGER-NEXT: %[[F1:.+]] = coll.all_gather_start %arg0 on %[[C]]
// EAGER-NEXT: %[[F2:.+]] = coll.all_gather_start %arg1 on %[[C]]
// EAGER-NEXT: math.exp
// EAGER-NEXT: math.exp
// EAGER-NEXT: coll.wait %[[F1]]
// EAGER-NEXT: arith.addf
// EAGER-NEXT: coll.wait %[[F2]]

// -----

// Three units, each a gather, an add and a reduce-scatter of the result (a
// stand-in for its gradient), the reduce-scatters waited at the end as
// zero-partition leaves them.
func.func @units(%w0: tensor<4xf32> {train.param = "layers.0.w"}, %w1: tensor<4xf32> {train.param = "layers.1.w"},
                 %w2: tensor<4xf32> {train.param = "layers.2.w"}, %x: tensor<16xf32>)
    -> (tensor<16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %c = coll.comm_world : !coll.comm<4>
  %f0 = coll.all_gather_start %w0 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %g0 = coll.wait %f0 : !coll.future<tensor<16xf32>>
  %y0 = arith.addf %x, %g0 : tensor<16xf32>
  %r0 = coll.reduce_scatter_start %y0 on %c scatter_axis = 0 reduction = <avg> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %f1 = coll.all_gather_start %w1 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %g1 = coll.wait %f1 : !coll.future<tensor<16xf32>>
  %y1 = arith.addf %y0, %g1 : tensor<16xf32>
  %r1 = coll.reduce_scatter_start %y1 on %c scatter_axis = 0 reduction = <avg> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %f2 = coll.all_gather_start %w2 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %g2 = coll.wait %f2 : !coll.future<tensor<16xf32>>
  %y2 = arith.addf %y1, %g2 : tensor<16xf32>
  %r2 = coll.reduce_scatter_start %y2 on %c scatter_axis = 0 reduction = <avg> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %s0 = coll.wait %r0 : !coll.future<tensor<4xf32>>
  %s1 = coll.wait %r1 : !coll.future<tensor<4xf32>>
  %s2 = coll.wait %r2 : !coll.future<tensor<4xf32>>
  return %y2, %s0, %s1, %s2 : tensor<16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Synchronous: every wait right after its start.
// SYNC-LABEL: func.func @units
// SYNC: %[[F0:.+]] = coll.all_gather_start %arg0
// SYNC-NEXT: coll.wait %[[F0]]
// SYNC-NEXT: arith.addf
// SYNC-NEXT: %[[R0:.+]] = coll.reduce_scatter_start
// SYNC-NEXT: coll.wait %[[R0]]
// SYNC-NEXT: %[[F1:.+]] = coll.all_gather_start %arg1
// SYNC-NEXT: coll.wait %[[F1]]
// SYNC-NEXT: arith.addf
// SYNC-NEXT: %[[R1:.+]] = coll.reduce_scatter_start
// SYNC-NEXT: coll.wait %[[R1]]

// With FSDP's policy unit k+1's gather starts as unit k's compute starts; unit k's
// reduce-scatter is waited when unit k+1's compute has ended (before unit
// k+2's), the last ones at the end.
// FSDP-LABEL: func.func @units
// FSDP: %[[F0:.+]] = coll.all_gather_start %arg0
// FSDP-NEXT: %[[G0:.+]] = coll.wait %[[F0]]
// FSDP-NEXT: %[[F1:.+]] = coll.all_gather_start %arg1
// FSDP-NEXT: %[[Y0:.+]] = arith.addf %arg3, %[[G0]]
// FSDP-NEXT: %[[R0:.+]] = coll.reduce_scatter_start %[[Y0]]
// FSDP-NEXT: %[[G1:.+]] = coll.wait %[[F1]]
// FSDP-NEXT: %[[F2:.+]] = coll.all_gather_start %arg2
// FSDP-NEXT: %[[Y1:.+]] = arith.addf %[[Y0]], %[[G1]]
// FSDP-NEXT: %[[R1:.+]] = coll.reduce_scatter_start %[[Y1]]
// FSDP-NEXT: %[[G2:.+]] = coll.wait %[[F2]]
// FSDP-NEXT: coll.wait %[[R0]]
// FSDP-NEXT: arith.addf %[[Y1]], %[[G2]]
// FSDP-NEXT: %[[R2:.+]] = coll.reduce_scatter_start
// FSDP-NEXT: coll.wait %[[R1]]
// FSDP-NEXT: coll.wait %[[R2]]
// FSDP-NEXT: return
