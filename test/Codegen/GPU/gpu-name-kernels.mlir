// RUN: loom-opt %s --gpu-name-kernels --split-input-file --verify-diagnostics | FileCheck %s

// Two kernels outlined from one function share the entry name; each takes its
// module's name and the launches follow.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @step_kernel {
// CHECK-NEXT: gpu.func @step_kernel(%{{.*}}: memref<4xf32>) kernel
// CHECK: gpu.module @step_kernel_0 {
// CHECK-NEXT: gpu.func @step_kernel_0(%{{.*}}: memref<4xf32>) kernel
// CHECK: gpu.func @helper
// CHECK: func.func @step
// CHECK: gpu.launch_func @step_kernel::@step_kernel
// CHECK: gpu.launch_func @step_kernel_0::@step_kernel_0
// CHECK: gpu.launch_func @step_kernel_0::@step_kernel_0
module attributes {gpu.container_module} {
  gpu.module @step_kernel {
    gpu.func @step_kernel(%a: memref<4xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @step_kernel_0 {
    gpu.func @step_kernel(%a: memref<4xf32>) kernel {
      gpu.return
    }
    gpu.func @helper() {
      gpu.return
    }
  }
  func.func @step(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @step_kernel::@step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @step_kernel_0::@step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @step_kernel_0::@step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
}

// -----

// A module whose own name is taken inside it is left alone, with an error.
module attributes {gpu.container_module} {
  // expected-error @+1 {{cannot name its kernel @k_1: the module already holds that symbol}}
  gpu.module @k_1 {
    gpu.func @k(%a: memref<4xf32>) kernel {
      gpu.return
    }
    gpu.func @k_1() {
      gpu.return
    }
  }
}
