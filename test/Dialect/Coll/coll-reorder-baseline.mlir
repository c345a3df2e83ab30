// Tests the baseline orders: waits sunk to their first use, and gathers
// hoisted as far as their operands allow (keeping their order).
// RUN: loom-opt %s -coll-reorder-baseline=policy=original | FileCheck %s --check-prefix=ORIGINAL
// RUN: loom-opt %s -coll-reorder-baseline=policy=sink-waits | FileCheck %s --check-prefix=SINK
// RUN: loom-opt %s -coll-reorder-baseline=policy=eager-prefetch | FileCheck %s --check-prefix=EAGER
// RUN: not loom-opt %s -coll-reorder-baseline=policy=random 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: coll-reorder-baseline: expected policy original, sink-waits or eager-prefetch, got 'random'

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
