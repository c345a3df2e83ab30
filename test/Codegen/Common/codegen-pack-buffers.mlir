// Tests codegen-pack-buffers (the fallback placement after bufferisation): buffers whose lifetimes do not overlap share
// arena space, overlapping ones do not, escaping ones keep their own
// allocation, and an address handed to a call keeps its buffer live.
// RUN: loom-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(codegen-pack-buffers))" | FileCheck %s

// %a dies before %b is allocated: both at offset 0. %c overlaps %b: after
// it, at 256 (64-byte aligned). Deallocations go; the arena is freed.
// CHECK-LABEL: func.func @reuse
// CHECK-SAME: train.packed_bound_bytes = 512 : i64, train.packed_bytes = 512 : i64
// CHECK: %[[ARENA:.+]] = memref.alloc() {alignment = 64 : i64} : memref<512xi8>
// CHECK: %[[C0:.+]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[C0]]][] : memref<512xi8> to memref<64xf32>
// CHECK: %[[C0B:.+]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[C0B]]][] : memref<512xi8> to memref<64xf32>
// CHECK: %[[C256:.+]] = arith.constant 256 : index
// CHECK: memref.view %[[ARENA]][%[[C256]]][] : memref<512xi8> to memref<64xf32>
// CHECK-NOT: memref.dealloc %{{.+}} : memref<64xf32>
// CHECK: memref.dealloc %[[ARENA]]
// CHECK-NEXT: return
func.func @reuse(%x: memref<64xf32>, %y: memref<64xf32>) {
  %a = memref.alloc() : memref<64xf32>
  memref.copy %x, %a : memref<64xf32> to memref<64xf32>
  memref.copy %a, %y : memref<64xf32> to memref<64xf32>
  %b = memref.alloc() : memref<64xf32>
  %c = memref.alloc() : memref<64xf32>
  memref.copy %x, %b : memref<64xf32> to memref<64xf32>
  memref.copy %b, %c : memref<64xf32> to memref<64xf32>
  memref.copy %c, %y : memref<64xf32> to memref<64xf32>
  memref.dealloc %a : memref<64xf32>
  memref.dealloc %b : memref<64xf32>
  memref.dealloc %c : memref<64xf32>
  return
}

// -----

// A returned buffer escapes and keeps its allocation; a view extends the
// lifetime of the buffer it views.
// CHECK-LABEL: func.func @escape_and_views
// CHECK-SAME: train.packed_bytes = 256 : i64
// CHECK: memref.view
// CHECK: %[[R:.+]] = memref.alloc() : memref<8x8xf32>
// CHECK: return %[[R]]
func.func @escape_and_views(%x: memref<64xf32>) -> memref<8x8xf32> {
  %t = memref.alloc() : memref<64xf32>
  memref.copy %x, %t : memref<64xf32> to memref<64xf32>
  %v = memref.expand_shape %t [[0, 1]] output_shape [8, 8] : memref<64xf32> into memref<8x8xf32>
  %r = memref.alloc() : memref<8x8xf32>
  memref.copy %v, %r : memref<8x8xf32> to memref<8x8xf32>
  memref.dealloc %t : memref<64xf32>
  return %r : memref<8x8xf32>
}

// -----

// The runtime reads %in through its address until @wait. CSE has merged
// the address the wait takes with the one the start took, so only the
// address's uses show that %in lives until the wait: %late must not reuse
// its space.
// CHECK-LABEL: func.func @address_keeps_alive
// CHECK-SAME: train.packed_bytes = 512 : i64
// CHECK: memref.view %{{.+}}[%{{.+}}][] : memref<512xi8> to memref<64xf32>
// CHECK: %[[C256:.+]] = arith.constant 256 : index
// CHECK: memref.view %{{.+}}[%[[C256]]][] : memref<512xi8> to memref<64xf32>
func.func private @start(i64)
func.func private @wait(i64)
func.func @address_keeps_alive(%x: memref<64xf32>, %y: memref<64xf32>) {
  %in = memref.alloc() : memref<64xf32>
  memref.copy %x, %in : memref<64xf32> to memref<64xf32>
  %p = memref.extract_aligned_pointer_as_index %in : memref<64xf32> -> index
  %i = arith.index_cast %p : index to i64
  call @start(%i) : (i64) -> ()
  %late = memref.alloc() : memref<64xf32>
  memref.copy %x, %late : memref<64xf32> to memref<64xf32>
  memref.copy %late, %y : memref<64xf32> to memref<64xf32>
  call @wait(%i) : (i64) -> ()
  memref.dealloc %in : memref<64xf32>
  memref.dealloc %late : memref<64xf32>
  return
}
