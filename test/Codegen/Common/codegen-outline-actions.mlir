// Tests codegen-outline-actions: a pipeline stage's actions (named in
// locations, as pp-partition stamps them) become calls of one function per
// kind of action, the constants that differ between microbatches (arena
// offsets, a slice's offset into the batch, a transfer's tag, a probe's op
// id) its arguments.
// RUN: loom-opt %s -split-input-file -pass-pipeline="builtin.module(codegen-outline-actions)" | FileCheck %s

// F0 and F1 read their microbatch's slice of the batch and write their
// arena slot: one function, called with the slice's row (0, 2) and the
// slot's offset (0, 64). The slice's layout becomes dynamic inside it, and
// its loads read it as it is. B0 differs: a function of its own, which
// takes what follows it (the arena's release). The arena's allocation,
// before the first action, stays in the step.
// CHECK-LABEL: func.func private @step_action0(
// CHECK-SAME: %[[BATCH:[^:]+]]: memref<4x8xf32>, %[[ARENA:[^:]+]]: memref<256xi8>, %[[ROW:[^:]+]]: index, %[[OFF:[^:]+]]: index, %[[ID:[^:]+]]: i64)
// CHECK-SAME: attributes {passthrough = ["noinline"]}
// CHECK: %[[C0:.+]] = arith.constant 0 : index
// CHECK: %[[SLICE:.+]] = memref.subview %[[BATCH]][%[[ROW]], %[[C0]]] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: ?>>
// CHECK: %[[SLOT:.+]] = memref.view %[[ARENA]][%[[OFF]]][] : memref<256xi8> to memref<2x8xf32>
// CHECK: memref.load %[[SLICE]]
// CHECK-NOT: memref.cast
// CHECK: memref.store %{{.+}}, %[[SLOT]]
// CHECK: call @probe(%[[ID]])
// CHECK: return
// CHECK-LABEL: func.func private @step_action2(
// CHECK: memref.dealloc
// CHECK-LABEL: func.func @step(
// CHECK: %[[A:.+]] = memref.alloc() : memref<256xi8>
// CHECK: %[[R0:.+]] = arith.constant 0 : index
// CHECK: %[[O0:.+]] = arith.constant 0 : index
// CHECK: %[[I0:.+]] = arith.constant 7 : i64
// CHECK: call @step_action0(%{{.+}}, %[[A]], %[[R0]], %[[O0]], %[[I0]])
// CHECK: %[[R1:.+]] = arith.constant 2 : index
// CHECK: %[[O1:.+]] = arith.constant 64 : index
// CHECK: %[[I1:.+]] = arith.constant 9 : i64
// CHECK: call @step_action0(%{{.+}}, %[[A]], %[[R1]], %[[O1]], %[[I1]])
// CHECK-NEXT: call @step_action2(
// CHECK-NEXT: return
func.func private @probe(i64)
func.func @step(%batch: memref<4x8xf32>, %out: memref<8xf32>) {
  %arena = memref.alloc() : memref<256xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %id7 = arith.constant 7 : i64
  %id9 = arith.constant 9 : i64
  %s0 = memref.subview %batch[0, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  %v0 = memref.view %arena[%c0][] : memref<256xi8> to memref<2x8xf32>
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %x = memref.load %s0[%i, %j] : memref<2x8xf32, strided<[8, 1]>>
      memref.store %x, %v0[%i, %j] : memref<2x8xf32>
    }
  } loc("loom.op.1"("loom.action.F0"("model.py":1:1)))
  call @probe(%id7) : (i64) -> () loc("loom.op.1"("loom.action.F0"("model.py":1:1)))
  %s1 = memref.subview %batch[2, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  %v1 = memref.view %arena[%c64][] : memref<256xi8> to memref<2x8xf32>
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %x = memref.load %s1[%i, %j] : memref<2x8xf32, strided<[8, 1], offset: 16>>
      memref.store %x, %v1[%i, %j] : memref<2x8xf32>
    }
  } loc("loom.op.2"("loom.action.F1"("model.py":1:1)))
  call @probe(%id9) : (i64) -> () loc("loom.op.2"("loom.action.F1"("model.py":1:1)))
  scf.for %j = %c0 to %c8 step %c1 {
    %x = memref.load %v0[%c0, %j] : memref<2x8xf32>
    %y = memref.load %v1[%c1, %j] : memref<2x8xf32>
    %z = arith.addf %x, %y : f32
    memref.store %z, %out[%j] : memref<8xf32>
  } loc("loom.op.3"("loom.action.B0"("model.py":2:1)))
  memref.dealloc %arena : memref<256xi8>
  return
}

// -----

// A user that needs the slice's static layout (here a call) reads it
// through a cast back: the two actions stay apart, and nothing is wrong.
// CHECK-LABEL: func.func private @cast_action0(
// CHECK: %[[S:.+]] = memref.subview %{{.+}} : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: ?>>
// CHECK: %[[C:.+]] = memref.cast %[[S]] : memref<2x8xf32, strided<[8, 1], offset: ?>> to memref<2x8xf32, strided<[8, 1]>>
// CHECK: call @use0(%[[C]])
// CHECK-LABEL: func.func private @cast_action1(
// CHECK: memref.cast %{{.+}} : memref<2x8xf32, strided<[8, 1], offset: ?>> to memref<2x8xf32, strided<[8, 1], offset: 16>>
// CHECK-LABEL: func.func @cast(
// CHECK: call @cast_action0(
// CHECK: call @cast_action1(
func.func private @use0(memref<2x8xf32, strided<[8, 1]>>)
func.func private @use1(memref<2x8xf32, strided<[8, 1], offset: 16>>)
func.func @cast(%batch: memref<4x8xf32>) {
  %s0 = memref.subview %batch[0, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  call @use0(%s0) : (memref<2x8xf32, strided<[8, 1]>>) -> () loc("loom.action.F0"("model.py":1:1))
  %s1 = memref.subview %batch[2, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  call @use1(%s1) : (memref<2x8xf32, strided<[8, 1], offset: 16>>) -> () loc("loom.action.F1"("model.py":1:1))
  return
}

// -----

// A step without actions (no pipeline stages) is left as it is.
// CHECK-LABEL: func.func @plain(
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: return
// CHECK-NOT: func.func
func.func @plain() {
  %a = memref.alloc() : memref<8xf32>
  memref.dealloc %a : memref<8xf32>
  return
}
