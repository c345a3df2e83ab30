// Tests gpu-map-linalg's diagnostics: what the CUDA target cannot place.
// RUN: loom-opt %s -split-input-file -verify-diagnostics -gpu-map-linalg -o /dev/null
// RUN: not loom-opt %s -gpu-map-linalg=threads=100 -o /dev/null 2>&1 | FileCheck %s --check-prefix=THREADS
// THREADS: threads must be a multiple of 32 from 32 to 1024

// A host loop that reads memory around two ops cannot be placed.
func.func @two_ops(%ids: memref<8xi32>, %x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  // expected-error @+1 {{a host loop that reads memory must repeat exactly one elementwise linalg op}}
  scf.for %t = %c0 to %c8 step %c1 {
    %id = memref.load %ids[%t] : memref<8xi32>
    linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
        outs(%x : memref<64xf32>) {
    ^bb0(%b: f32):
      linalg.yield %b : f32
    }
    linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
        outs(%x : memref<64xf32>) {
    ^bb0(%b: f32):
      linalg.yield %b : f32
    }
  }
  return
}

// -----

// Dynamic shapes are refused.
func.func @dynamic(%x: memref<?xf32>) {
  // expected-error @+1 {{the CUDA target needs static loop bounds}}
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      outs(%x : memref<?xf32>) {
  ^bb0(%b: f32):
    linalg.yield %b : f32
  }
  return
}

// -----

// Host code must not read device memory.
func.func @host_load(%x: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{this op would run on the host against device memory}}
  %v = memref.load %x[%c0] : memref<8xf32>
  return %v : f32
}
