// RUN: loom-opt %s --split-input-file --codegen-deallocate-at-exit | FileCheck %s

// A planned step: its arena and a send's empty buffer, at the top of the
// function, followed through views and a loop's iteration argument, are
// freed where it returns; nothing else changes (the loop keeps its
// iteration argument: upstream's pipeline would fold it away).

// CHECK-LABEL: func.func @planned
// CHECK:         %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1024xi8>
// CHECK:         %[[FUTURE:.*]] = memref.alloc() : memref<0xf32>
// CHECK:         scf.for {{.*}} iter_args
// CHECK-NOT:     memref.dealloc
// CHECK:         memref.dealloc %[[ARENA]] : memref<1024xi8>
// CHECK-NEXT:    memref.dealloc %[[FUTURE]] : memref<0xf32>
// CHECK-NEXT:    return
func.func @planned(%x: memref<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %arena = memref.alloc() {alignment = 64 : i64} : memref<1024xi8>
  %future = memref.alloc() : memref<0xf32>
  %v = memref.view %arena[%c0][] : memref<1024xi8> to memref<4xf32>
  linalg.copy ins(%x : memref<4xf32>) outs(%v : memref<4xf32>)
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%b = %v) -> memref<4xf32> {
    linalg.copy ins(%b : memref<4xf32>) outs(%x : memref<4xf32>)
    scf.yield %b : memref<4xf32>
  }
  linalg.copy ins(%last : memref<4xf32>) outs(%x : memref<4xf32>)
  return
}

// -----

// A buffer the function returns escapes: upstream's pipeline runs on the
// whole module, which frees the loop body's buffer in the loop and folds
// the other function's loop.

// CHECK-LABEL: func.func @planned
// CHECK:         scf.for
// CHECK-NOT:     iter_args
// CHECK-LABEL: func.func @returned
// CHECK:         %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NOT:     memref.dealloc %[[A]]
// CHECK:         return %[[A]]
// CHECK-LABEL: func.func @in_loop
// CHECK:         scf.for
// CHECK:           %[[B:.*]] = memref.alloc() : memref<4xf32>
// CHECK:           memref.dealloc %[[B]]
func.func @planned(%x: memref<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %arena = memref.alloc() : memref<1024xi8>
  %v = memref.view %arena[%c0][] : memref<1024xi8> to memref<4xf32>
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%b = %v) -> memref<4xf32> {
    linalg.copy ins(%b : memref<4xf32>) outs(%x : memref<4xf32>)
    scf.yield %b : memref<4xf32>
  }
  linalg.copy ins(%last : memref<4xf32>) outs(%x : memref<4xf32>)
  return
}

func.func @returned() -> memref<4xf32> {
  %a = memref.alloc() : memref<4xf32>
  return %a : memref<4xf32>
}

func.func @in_loop(%x: memref<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %b = memref.alloc() : memref<4xf32>
    linalg.copy ins(%x : memref<4xf32>) outs(%b : memref<4xf32>)
    linalg.copy ins(%b : memref<4xf32>) outs(%x : memref<4xf32>)
  }
  return
}

// -----

// A buffer passed to a call may be kept by the callee: upstream's pipeline
// (whose canonicalisation drops the unused buffer).

// CHECK-LABEL: func.func @called
// CHECK-NOT:     memref<8xf32>
// CHECK:         %[[C:.*]] = memref.alloc() : memref<4xf32>
// CHECK:         call @keep(%[[C]])
// CHECK:         memref.dealloc %[[C]]
func.func private @keep(memref<4xf32>)

func.func @called() {
  %unused = memref.alloc() : memref<8xf32>
  %c = memref.alloc() : memref<4xf32>
  call @keep(%c) : (memref<4xf32>) -> ()
  return
}
