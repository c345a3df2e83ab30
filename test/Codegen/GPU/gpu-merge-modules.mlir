// RUN: loom-opt %s --gpu-merge-modules --split-input-file | FileCheck %s

// Three kernels, two of them equal up to their names: one module with two
// kernels; both launches of the equal ones go to the first.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @loom_kernels {
// CHECK-NEXT: gpu.func @k_0(%{{.*}}: memref<4xf32>) kernel
// CHECK: gpu.func @k_2(%{{.*}}: memref<4xf32>) kernel
// CHECK-NOT: gpu.module
// CHECK: func.func @step
// CHECK-NEXT: %[[C1:.*]] = arith.constant
// CHECK-NEXT: gpu.launch_func @loom_kernels::@k_0
// CHECK-NEXT: gpu.launch_func @loom_kernels::@k_0
// CHECK-NEXT: gpu.launch_func @loom_kernels::@k_2
module attributes {gpu.container_module} {
  gpu.module @k_0 {
    gpu.func @k_0(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : memref<4xf32>
      %y = arith.addf %x, %x : f32
      memref.store %y, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @k_1 {
    gpu.func @k_1(%b: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = memref.load %b[%c0] : memref<4xf32>
      %y = arith.addf %x, %x : f32
      memref.store %y, %b[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @k_2 {
    gpu.func @k_2(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : memref<4xf32>
      %y = arith.mulf %x, %x : f32
      memref.store %y, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
  func.func @step(%a: memref<4xf32>, %b: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @k_0::@k_0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @k_1::@k_1 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%b : memref<4xf32>)
    gpu.launch_func @k_2::@k_2 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
}

// -----

// Kernels with the same name but different launch bounds stay apart (the
// second is renamed); a module with a helper function, and one with a
// target attached, stay as they are. The merged module's name is taken, so
// it gets another.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @loom_kernels_0 {
// CHECK-NEXT: gpu.func @k(%{{.*}}: memref<4xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>}
// CHECK: gpu.func @k_0(%{{.*}}: memref<4xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>}
// CHECK: gpu.module @with_helper {
// CHECK: gpu.module @targeted [#nvvm.target]
// CHECK: func.func @loom_kernels
// CHECK: func.func @step
// CHECK-NEXT: %[[C1:.*]] = arith.constant
// CHECK-NEXT: gpu.launch_func @loom_kernels_0::@k
// CHECK-NEXT: gpu.launch_func @loom_kernels_0::@k_0
// CHECK-NEXT: gpu.launch_func @with_helper::@w
// CHECK-NEXT: gpu.launch_func @targeted::@t
module attributes {gpu.container_module} {
  gpu.module @a {
    gpu.func @k(%a: memref<4xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      gpu.return
    }
  }
  gpu.module @b {
    gpu.func @k(%a: memref<4xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      gpu.return
    }
  }
  gpu.module @with_helper {
    gpu.func @w(%a: memref<4xf32>) kernel {
      gpu.return
    }
    gpu.func @helper() {
      gpu.return
    }
  }
  gpu.module @targeted [#nvvm.target] {
    gpu.func @t(%a: memref<4xf32>) kernel {
      gpu.return
    }
  }
  func.func @loom_kernels() {
    return
  }
  func.func @step(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @b::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @with_helper::@w blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @targeted::@t blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
}
