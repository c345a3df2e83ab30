// Tests trainer-manifest: the manifest completed with the lowered plan's
// figures, and loom_step_packed building one descriptor per buffer.
// RUN: loom-opt %s -split-input-file -trainer-manifest -verify-diagnostics | FileCheck %s

// Buffers: w (4 x f32, written in place), x (2x4 x f32), the loss (f32, a
// rank-0 descriptor) and w's update (its pointer unused): 16 + 32 + 4 bytes
// the trainer allocates, the 64-byte arena and 32 packed bytes.
// CHECK-LABEL: module {
// CHECK: llvm.mlir.global external constant @loom_step_manifest("loom-step 1\0Alr 1.000000e-01\0Aplanned_arena_bound_bytes 56\0Aplanned_arena_bytes 96\0Aplanned_peak_bytes 148\0Apredicted_peak_bytes 96\0Asource model.mlir\0Aunplanned_bytes 32\0Aworld_size 2\0Azero_stage 3\0Aarg param w f32 4 2x4\0Aarg input x f32 2x4 2x4\0Aresult loss loss f32 - -\0Aresult param w f32 4 2x4 in-place\0A\00")
// CHECK: llvm.func @loom_step_packed(%[[BUFFERS:.+]]: !llvm.ptr) {
// CHECK: %[[P0:.+]] = llvm.getelementptr %[[BUFFERS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[W:.+]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[X:.+]] = llvm.load
// CHECK: %[[L:.+]] = llvm.load
// CHECK: %[[N:.+]] = llvm.load
// The call: pointer, pointer, offset, then sizes and strides.
// CHECK: llvm.call @loom_step(%[[W]], %[[W]], %{{.+}}, %{{.+}}, %{{.+}}, %[[X]], %[[X]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[L]], %[[L]], %{{.+}}, %[[N]], %[[N]], %{{.+}}, %{{.+}}, %{{.+}})
// CHECK-NOT: train.step_manifest
module attributes {train.step_manifest = #train.step_manifest<world_size = 2, zero_stage = 3, lr = 1.000000e-01 : f64, source = "model.mlir", predicted_peak_bytes = 96, tensors = [
    #train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [2, 4]>,
    #train.manifest_tensor<kind = "arg", role = "input", name = "x", type = tensor<2x4xf32>, full_shape = [2, 4]>,
    #train.manifest_tensor<kind = "result", role = "loss", name = "loss", type = tensor<f32>, full_shape = []>,
    #train.manifest_tensor<kind = "result", role = "param", name = "w", type = tensor<4xf32>, full_shape = [2, 4], in_place = true>]>} {
  llvm.func @loom_step(%a0: !llvm.ptr, %a1: !llvm.ptr, %a2: i64, %a3: i64, %a4: i64,
                       %b0: !llvm.ptr, %b1: !llvm.ptr, %b2: i64, %b3: i64, %b4: i64, %b5: i64, %b6: i64,
                       %c0: !llvm.ptr, %c1: !llvm.ptr, %c2: i64,
                       %d0: !llvm.ptr, %d1: !llvm.ptr, %d2: i64, %d3: i64, %d4: i64)
      attributes {train.arena_bound_bytes = 32 : i64, train.arena_bytes = 64 : i64,
                  train.packed_bound_bytes = 24 : i64, train.packed_bytes = 32 : i64} {
    llvm.return
  }
}

// -----

// expected-error @+1 {{trainer-manifest: expected the module's train.step_manifest (run trainer-entry-point first)}}
module {
}


// -----

// expected-error @+1 {{trainer-manifest: expected the lowered @loom_step (run trainer-entry-point, then lower)}}
module attributes {train.step_manifest = #train.step_manifest<world_size = 1, zero_stage = 0, predicted_peak_bytes = 0, tensors = [
    #train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [4]>]>} {
}

// -----

module attributes {train.step_manifest = #train.step_manifest<world_size = 1, zero_stage = 0, predicted_peak_bytes = 0, tensors = [
    #train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [4]>]>} {
  // expected-error @+1 {{trainer-manifest: expected 5 lowered arguments for the manifest's 1 tensors, got 3}}
  llvm.func @loom_step(%a0: !llvm.ptr, %a1: !llvm.ptr, %a2: i64) {
    llvm.return
  }
}
