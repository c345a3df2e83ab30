// Tests the baseline orders: synchronous, PyTorch FSDP's (each unit's
// collectives merged into flat ones), waits sunk to their first use, and
// gathers hoisted as far as their operands allow (keeping their order).
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

// -----

// FSDP's flat parameters: two units of two parameters each, as zero-partition
// leaves a step (each parameter gathered before its first use in the forward
// and again in the backward, each gradient reduce-scattered as it exists and
// waited at the update, whose results are the updated parameters). Each
// unit's gathers for one use become one all-gather of its concatenated
// shards, each member its columns of the [4, 8] result; each unit's gradients
// one reduce-scatter launched once the last of them exists, each member its
// slice of the result. The next unit's gather (with its concatenation) starts
// as this unit's compute starts.
func.func @two_units(%a0: tensor<4xf32> {train.param = "layers.0.a"}, %b0: tensor<4xf32> {train.param = "layers.0.b"},
                     %a1: tensor<4xf32> {train.param = "layers.1.a"}, %b1: tensor<4xf32> {train.param = "layers.1.b"},
                     %x: tensor<16xf32>)
    -> (tensor<16xf32>, tensor<4xf32> {train.param = "layers.0.a"}, tensor<4xf32> {train.param = "layers.0.b"},
        tensor<4xf32> {train.param = "layers.1.a"}, tensor<4xf32> {train.param = "layers.1.b"}) {
  %c = coll.comm_world : !coll.comm<4>
  %fa0 = coll.all_gather_start %a0 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %ga0 = coll.wait %fa0 : !coll.future<tensor<16xf32>>
  %y0 = arith.mulf %x, %ga0 : tensor<16xf32>
  coll.release %ga0 : tensor<16xf32>
  %fb0 = coll.all_gather_start %b0 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %gb0 = coll.wait %fb0 : !coll.future<tensor<16xf32>>
  %z0 = arith.addf %y0, %gb0 : tensor<16xf32>
  coll.release %gb0 : tensor<16xf32>
  %fa1 = coll.all_gather_start %a1 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %ga1 = coll.wait %fa1 : !coll.future<tensor<16xf32>>
  %y1 = arith.mulf %z0, %ga1 : tensor<16xf32>
  coll.release %ga1 : tensor<16xf32>
  %fb1 = coll.all_gather_start %b1 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %gb1 = coll.wait %fb1 : !coll.future<tensor<16xf32>>
  %z1 = arith.addf %y1, %gb1 : tensor<16xf32>
  coll.release %gb1 : tensor<16xf32>
  %loss = math.exp %z1 : tensor<16xf32>
  %fb1b = coll.all_gather_start %b1 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %gb1b = coll.wait %fb1b : !coll.future<tensor<16xf32>>
  %db1 = arith.mulf %loss, %gb1b : tensor<16xf32>
  coll.release %gb1b : tensor<16xf32>
  %rb1 = coll.reduce_scatter_start %db1 on %c scatter_axis = 0 reduction = <avg> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %fa1b = coll.all_gather_start %a1 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %ga1b = coll.wait %fa1b : !coll.future<tensor<16xf32>>
  %da1 = arith.mulf %db1, %ga1b : tensor<16xf32>
  coll.release %ga1b : tensor<16xf32>
  %ra1 = coll.reduce_scatter_start %da1 on %c scatter_axis = 0 reduction = <avg> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %fb0b = coll.all_gather_start %b0 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %gb0b = coll.wait %fb0b : !coll.future<tensor<16xf32>>
  %db0 = arith.mulf %da1, %gb0b : tensor<16xf32>
  coll.release %gb0b : tensor<16xf32>
  %rb0 = coll.reduce_scatter_start %db0 on %c scatter_axis = 0 reduction = <avg> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %fa0b = coll.all_gather_start %a0 on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %ga0b = coll.wait %fa0b : !coll.future<tensor<16xf32>>
  %da0 = arith.mulf %db0, %ga0b : tensor<16xf32>
  coll.release %ga0b : tensor<16xf32>
  %ra0 = coll.reduce_scatter_start %da0 on %c scatter_axis = 0 reduction = <avg> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %sa0 = coll.wait %ra0 : !coll.future<tensor<4xf32>>
  %na0 = arith.subf %a0, %sa0 : tensor<4xf32>
  %sb0 = coll.wait %rb0 : !coll.future<tensor<4xf32>>
  %nb0 = arith.subf %b0, %sb0 : tensor<4xf32>
  %sa1 = coll.wait %ra1 : !coll.future<tensor<4xf32>>
  %na1 = arith.subf %a1, %sa1 : tensor<4xf32>
  %sb1 = coll.wait %rb1 : !coll.future<tensor<4xf32>>
  %nb1 = arith.subf %b1, %sb1 : tensor<4xf32>
  return %loss, %na0, %nb0, %na1, %nb1 : tensor<16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// FSDP-LABEL: func.func @two_units
// Forward: unit 0, then unit 1. Each member is copied out of the gathered
// buffer, which is released once they are.
// FSDP: %[[C0:.+]] = tensor.concat dim(0) %arg0, %arg1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
// FSDP-NEXT: %[[F0:.+]] = coll.all_gather_start %[[C0]] on %{{.+}} gather_axis = 0 : (tensor<8xf32>, !coll.comm<4>) -> !coll.future<tensor<32xf32>>
// FSDP-NEXT: %[[W0:.+]] = coll.wait %[[F0]]
// FSDP-NEXT: %[[C1:.+]] = tensor.concat dim(0) %arg2, %arg3
// FSDP-NEXT: %[[F1:.+]] = coll.all_gather_start %[[C1]]
// FSDP-NEXT: %[[M0:.+]] = tensor.expand_shape %[[W0]] {{\[\[}}0, 1]] output_shape [4, 8]
// FSDP-NEXT: %[[A0:.+]] = tensor.extract_slice %[[M0]][0, 0] [4, 4] [1, 1]
// FSDP-NEXT: %[[E0:.+]] = tensor.empty() : tensor<4x4xf32>
// FSDP-NEXT: %[[CA0:.+]] = linalg.copy ins(%[[A0]] : tensor<4x4xf32>) outs(%[[E0]] : tensor<4x4xf32>)
// FSDP-NEXT: %[[GA0:.+]] = tensor.collapse_shape %[[CA0]] {{\[\[}}0, 1]] : tensor<4x4xf32> into tensor<16xf32>
// FSDP-NEXT: %[[B0:.+]] = tensor.extract_slice %[[M0]][0, 4] [4, 4] [1, 1]
// FSDP-NEXT: tensor.empty
// FSDP-NEXT: %[[CB0:.+]] = linalg.copy ins(%[[B0]]
// FSDP-NEXT: %[[GB0:.+]] = tensor.collapse_shape %[[CB0]]
// FSDP-NEXT: coll.release %[[W0]] : tensor<32xf32>
// FSDP-NEXT: %[[Y0:.+]] = arith.mulf %arg4, %[[GA0]]
// FSDP-NEXT: arith.addf %[[Y0]], %[[GB0]]
// FSDP-NEXT: %[[W1:.+]] = coll.wait %[[F1]]
// Backward: unit 1 (its members in the order the backward reads them), then
// unit 0.
// FSDP-NEXT: %[[C1B:.+]] = tensor.concat dim(0) %arg3, %arg2
// FSDP-NEXT: %[[F1B:.+]] = coll.all_gather_start %[[C1B]]
// FSDP-NOT: coll.all_gather_start
// FSDP: coll.release %[[W1]] : tensor<32xf32>
// FSDP-NOT: coll.all_gather_start
// FSDP: math.exp
// FSDP-NEXT: %[[W1B:.+]] = coll.wait %[[F1B]]
// FSDP-NEXT: %[[C0B:.+]] = tensor.concat dim(0) %arg1, %arg0
// FSDP-NEXT: %[[F0B:.+]] = coll.all_gather_start %[[C0B]]
// FSDP-NOT: coll.all_gather_start
// FSDP: coll.release %[[W1B]] : tensor<32xf32>
// FSDP-NOT: coll.all_gather_start
// FSDP-NOT: coll.reduce_scatter_start
// FSDP: %[[D1:.+]] = tensor.concat dim(1) %{{.+}}, %{{.+}} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
// FSDP-NEXT: %[[FLAT1:.+]] = tensor.collapse_shape %[[D1]] {{\[\[}}0, 1]] : tensor<4x8xf32> into tensor<32xf32>
// FSDP-NEXT: %[[R1:.+]] = coll.reduce_scatter_start %[[FLAT1]] on %{{.+}} scatter_axis = 0 reduction = <avg> : (tensor<32xf32>, !coll.comm<4>) -> !coll.future<tensor<8xf32>>
// FSDP-NEXT: %[[W0B:.+]] = coll.wait %[[F0B]]
// FSDP-NOT: coll.all_gather_start
// FSDP: coll.release %[[W0B]] : tensor<32xf32>
// FSDP-NOT: coll.all_gather_start
// FSDP-NOT: coll.reduce_scatter_start
// FSDP: %[[R0:.+]] = coll.reduce_scatter_start %{{.+}} -> !coll.future<tensor<8xf32>>
// FSDP-NEXT: %[[S0:.+]] = coll.wait %[[R0]]
// FSDP-NEXT: %[[SB0:.+]] = tensor.extract_slice %[[S0]][0] [4] [1] : tensor<8xf32> to tensor<4xf32>
// FSDP-NEXT: %[[SA0:.+]] = tensor.extract_slice %[[S0]][4] [4] [1] : tensor<8xf32> to tensor<4xf32>
// FSDP-NEXT: arith.subf %arg0, %[[SA0]]
// FSDP-NEXT: arith.subf %arg1, %[[SB0]]
// FSDP-NEXT: %[[S1:.+]] = coll.wait %[[R1]]
// FSDP-NEXT: %[[SB1:.+]] = tensor.extract_slice %[[S1]][0] [4] [1]
// FSDP-NEXT: %[[SA1:.+]] = tensor.extract_slice %[[S1]][4] [4] [1]
// FSDP-NEXT: arith.subf %arg2, %[[SA1]]
// FSDP-NEXT: arith.subf %arg3, %[[SB1]]
// FSDP-NEXT: return

// -----

// ZeRO-1/2: one reduce-scatter of the unit's gradients, and one all-gather
// of its updated parameters (a gather of anything but a parameter belongs to
// the unit whose train.param results it reaches).
func.func @updated_gathers(%a: tensor<16xf32> {train.param = "layers.0.a"}, %b: tensor<16xf32> {train.param = "layers.0.b"},
                           %da: tensor<16xf32>, %db: tensor<16xf32>)
    -> (tensor<16xf32> {train.param = "layers.0.a"}, tensor<16xf32> {train.param = "layers.0.b"}) {
  %c = coll.comm_world : !coll.comm<4>
  %ra = coll.reduce_scatter_start %da on %c scatter_axis = 0 reduction = <avg> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %rb = coll.reduce_scatter_start %db on %c scatter_axis = 0 reduction = <avg> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %sa = coll.wait %ra : !coll.future<tensor<4xf32>>
  %pa = tensor.extract_slice %a[0] [4] [1] : tensor<16xf32> to tensor<4xf32>
  %na = arith.subf %pa, %sa : tensor<4xf32>
  %sb = coll.wait %rb : !coll.future<tensor<4xf32>>
  %pb = tensor.extract_slice %b[0] [4] [1] : tensor<16xf32> to tensor<4xf32>
  %nb = arith.subf %pb, %sb : tensor<4xf32>
  %fa = coll.all_gather_start %na on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %wa = coll.wait %fa : !coll.future<tensor<16xf32>>
  %fb = coll.all_gather_start %nb on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<4>) -> !coll.future<tensor<16xf32>>
  %wb = coll.wait %fb : !coll.future<tensor<16xf32>>
  return %wa, %wb : tensor<16xf32>, tensor<16xf32>
}

// FSDP-LABEL: func.func @updated_gathers
// FSDP: %[[CAT:.+]] = tensor.concat dim(1) %{{.+}}, %{{.+}} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
// FSDP-NEXT: %[[FLAT:.+]] = tensor.collapse_shape %[[CAT]]
// FSDP-NEXT: coll.reduce_scatter_start %[[FLAT]] {{.*}} -> !coll.future<tensor<8xf32>>
// FSDP-NOT: coll.reduce_scatter_start
// FSDP: %[[P:.+]] = tensor.concat dim(0) %{{.+}}, %{{.+}} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
// FSDP-NEXT: %[[F:.+]] = coll.all_gather_start %[[P]] {{.*}} -> !coll.future<tensor<32xf32>>
// FSDP-NEXT: %[[W:.+]] = coll.wait %[[F]]
// FSDP-NEXT: %[[M:.+]] = tensor.expand_shape %[[W]] {{\[\[}}0, 1]] output_shape [4, 8]
// FSDP-NEXT: %[[A:.+]] = tensor.extract_slice %[[M]][0, 0] [4, 4] [1, 1]
// FSDP-NEXT: tensor.empty
// FSDP-NEXT: %[[CA:.+]] = linalg.copy ins(%[[A]]
// FSDP-NEXT: %[[GA:.+]] = tensor.collapse_shape %[[CA]]
// FSDP-NEXT: %[[B:.+]] = tensor.extract_slice %[[M]][0, 4] [4, 4] [1, 1]
// FSDP-NEXT: tensor.empty
// FSDP-NEXT: %[[CB:.+]] = linalg.copy ins(%[[B]]
// FSDP-NEXT: %[[GB:.+]] = tensor.collapse_shape %[[CB]]
// FSDP-NEXT: coll.release %[[W]] : tensor<32xf32>
// FSDP-NEXT: return %[[GA]], %[[GB]]
