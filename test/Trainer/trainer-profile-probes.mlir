// Tests trainer-profile-probes: runs of work with the same op ids between
// loomrt_op_begin and loomrt_op_end; allocations and views in between
// neither start nor end a run; work without ids ends one; a fused location
// is timed under its first id and names the others with loomrt_op_fused;
// the collective calls are bracketed alone (or not at all, with
// collective-calls=false).
// RUN: loom-opt %s -trainer-profile-probes | FileCheck %s
// RUN: loom-opt %s -trainer-profile-probes=collective-calls=false | FileCheck %s --check-prefix=NOCALLS
// RUN: loom-opt %s -trainer-profile-probes -trainer-profile-probes | FileCheck %s --check-prefix=TWICE

// CHECK: func.func private @loomrt_op_fused(i64, i64)
// CHECK-NEXT: func.func private @loomrt_op_end(i64)
// CHECK-NEXT: func.func private @loomrt_op_begin(i64)
// CHECK-LABEL: func.func @step
// The loop and the call of op 3 are one run, the allocation for op 4 inside it.
// CHECK: %[[C3:.+]] = arith.constant 3 : i64
// CHECK-NEXT: call @loomrt_op_begin(%[[C3]])
// CHECK-NEXT: scf.for
// CHECK: memref.alloc
// CHECK-NEXT: call @cblas_sgemm
// CHECK-NEXT: call @loomrt_op_end(%[[C3]])
// Op 4's copy, then work without an id, untimed.
// CHECK-NEXT: %[[C4:.+]] = arith.constant 4 : i64
// CHECK-NEXT: call @loomrt_op_begin(%[[C4]])
// CHECK-NEXT: memref.copy
// CHECK-NEXT: call @loomrt_op_end(%[[C4]])
// CHECK-NEXT: memref.copy
// The start of collective 5 alone, then the fused loop of ops 6 and 7.
// CHECK: %[[C5:.+]] = arith.constant 5 : i64
// CHECK-NEXT: call @loomrt_op_begin(%[[C5]])
// CHECK-NEXT: %[[H:.+]] = call @loomrt_coll_start
// CHECK-NEXT: call @loomrt_op_end(%[[C5]])
// CHECK-NEXT: %[[C6:.+]] = arith.constant 6 : i64
// CHECK-NEXT: %[[C7:.+]] = arith.constant 7 : i64
// CHECK-NEXT: call @loomrt_op_fused(%[[C7]], %[[C6]])
// CHECK-NEXT: call @loomrt_op_begin(%[[C6]])
// CHECK-NEXT: scf.for
// CHECK: call @loomrt_op_end(%[[C6]])
// The wait (op 8) alone.
// CHECK-NEXT: %[[C8:.+]] = arith.constant 8 : i64
// CHECK-NEXT: call @loomrt_op_begin(%[[C8]])
// CHECK-NEXT: call @loomrt_coll_wait(%[[H]]
// CHECK-NEXT: call @loomrt_op_end(%[[C8]])
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: return

// NOCALLS: call @loomrt_op_end
// NOCALLS: call @loomrt_op_end
// NOCALLS-NEXT: memref.copy
// NOCALLS-NEXT: arith.constant 0 : i64
// NOCALLS-NEXT: call @loomrt_coll_start
// NOCALLS: call @loomrt_op_fused
// NOCALLS: call @loomrt_op_end
// NOCALLS-NEXT: call @loomrt_coll_wait
// NOCALLS-NEXT: memref.dealloc

// A second run finds the step probed and leaves it.
// TWICE-COUNT-5: call @loomrt_op_begin
// TWICE-NOT: call @loomrt_op_begin

func.func private @cblas_sgemm(memref<4xf32>)
func.func private @loomrt_coll_start(i64) -> i64
func.func private @loomrt_coll_wait(i64)

func.func @step(%a: memref<4xf32>, %b: memref<4xf32>) {
  %c0 = arith.constant 0 : index loc("loom.op.1"(unknown))
  %c1 = arith.constant 1 : index loc("loom.op.1"(unknown))
  %c4 = arith.constant 4 : index loc("loom.op.2"(unknown))
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xf32>
    memref.store %x, %b[%i] : memref<4xf32>
  } loc("loom.op.3"(unknown))
  %t = memref.alloc() : memref<4xf32> loc("loom.op.4"(unknown))
  func.call @cblas_sgemm(%a) : (memref<4xf32>) -> () loc("loom.op.3"(unknown))
  memref.copy %a, %t : memref<4xf32> to memref<4xf32> loc("loom.op.4"(unknown))
  memref.copy %t, %b : memref<4xf32> to memref<4xf32>
  %k = arith.constant 0 : i64
  %h = func.call @loomrt_coll_start(%k) : (i64) -> i64 loc("loom.op.5"(unknown))
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xf32>
    memref.store %x, %b[%i] : memref<4xf32>
  } loc(fused["loom.op.6"(unknown), "loom.op.7"(unknown)])
  func.call @loomrt_coll_wait(%h) : (i64) -> () loc("loom.op.8"(unknown))
  memref.dealloc %t : memref<4xf32> loc("loom.op.4"(unknown))
  return loc("loom.op.9"(unknown))
}
