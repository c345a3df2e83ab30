// Tests trainer-entry-point: @loom_step around the step, results written
// into their buffers (an update tied to its argument into the argument's),
// the plan's arena on the entry, and the manifest the trainer will read.
// RUN: loom-opt %s -split-input-file -trainer-entry-point="source=model.mlir" -verify-diagnostics | FileCheck %s

// CHECK-LABEL: module attributes {train.step_manifest = #train.step_manifest<
// CHECK-SAME: world_size = 2, zero_stage = 3, optimizer = "sgd", lr = 1.000000e-01 : f64,
// CHECK-SAME: source = "model.mlir", scheduled_peak_bytes = 120, predicted_peak_bytes = 96, tensors = [
// CHECK-SAME: #train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [2, 4]>,
// CHECK-SAME: #train.manifest_tensor<kind = "arg", role = "input", name = "x", type = tensor<2x4xf32>, full_shape = [2, 4]>,
// CHECK-SAME: #train.manifest_tensor<kind = "result", role = "loss", name = "loss", type = tensor<f32>, full_shape = []>,
// CHECK-SAME: #train.manifest_tensor<kind = "result", role = "param", name = "w", type = tensor<4xf32>, full_shape = [2, 4], in_place = true>]>}
// CHECK: func.func private @step(
// CHECK: func.func @loom_step(%[[W:.+]]: memref<4xf32>, %[[X:.+]]: memref<2x4xf32>, %[[LOSS:.+]]: memref<f32>, %[[NEW:.+]]: memref<4xf32>)
// CHECK-SAME: attributes {train.arena_bound_bytes = 32 : i64, train.arena_bytes = 64 : i64}
// CHECK: %[[TW:.+]] = bufferization.to_tensor %[[W]] restrict
// CHECK: %[[TX:.+]] = bufferization.to_tensor %[[X]] restrict
// CHECK: %[[R:.+]]:2 = call @step(%[[TW]], %[[TX]])
// CHECK: bufferization.materialize_in_destination %[[R]]#0 in restrict writable %[[LOSS]]
// The update goes into the parameter's own buffer; its result buffer is
// not written.
// CHECK: bufferization.materialize_in_destination %[[R]]#1 in restrict writable %[[W]]
// CHECK-NEXT: return
func.func @step(%w: tensor<4xf32> {train.full_shape = array<i64: 2, 4>, train.param = "w"},
                %x: tensor<2x4xf32> {train.input = "x"})
    -> (tensor<f32> {train.loss}, tensor<4xf32> {train.full_shape = array<i64: 2, 4>, train.param = "w"})
    attributes {train.arena_bound_bytes = 32 : i64, train.arena_bytes = 64 : i64, train.lr = 0.1 : f64,
                train.optimizer = "sgd", train.scheduled_peak_bytes = 120 : i64, train.tied_results = array<i64: -1, 0>,
                train.timeline_peak_bytes = 96 : i64, train.zero_stage = 3 : i64} {
  %c = coll.comm_world : !coll.comm<2>
  %l = tensor.empty() : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Without a plan, the prediction is the memory timeline of the step with
// results in the trainer's buffers: the argument, the result and the 16
// bytes of %e.
// CHECK-LABEL: module attributes {train.step_manifest = #train.step_manifest<
// CHECK-SAME: world_size = 1, zero_stage = 0, source = "model.mlir", predicted_peak_bytes = 36, tensors = [
// CHECK-SAME: #train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [4]>,
// CHECK-SAME: #train.manifest_tensor<kind = "result", role = "loss", name = "loss", type = tensor<f32>, full_shape = []>]>}
func.func @unplanned(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %e = tensor.empty() : tensor<4xf32>
  %c = arith.constant 0.0 : f32
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s = tensor.empty() : tensor<f32>
  %r = linalg.reduce ins(%f : tensor<4xf32>) outs(%s : tensor<f32>) dimensions = [0]
    (%a: f32, %b: f32) {
      %sum = arith.addf %a, %b : f32
      linalg.yield %sum : f32
    }
  return %r : tensor<f32>
}

// -----

// expected-error @+1 {{trainer-entry-point: argument #1 of @untagged has no train role}}
func.func @untagged(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<4xf32>) -> (tensor<f32> {train.loss}) {
  %l = tensor.empty() : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{trainer-entry-point: argument #1 of @dynamic must be a static tensor of f32, f64, bf16, i32 or i64, got 'tensor<?xf32>'}}
func.func @dynamic(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<?xf32> {train.input = "x"}) -> (tensor<f32> {train.loss}) {
  %l = tensor.empty() : tensor<f32>
  return %l : tensor<f32>
}

// -----

// A name the manifest's lines could not carry is refused at compile time,
// not found malformed by the trainer.
// expected-error @+1 {{trainer-entry-point: expected a name without blanks, got "layer 0.w"}}
func.func @blank(%w: tensor<4xf32> {train.param = "layer 0.w"}) -> (tensor<f32> {train.loss}) {
  %l = tensor.empty() : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{trainer-entry-point: expected a training step (a function with a train.loss result), found none}}
module {
  func.func @no_loss(%w: tensor<4xf32>) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

func.func @step(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %l = tensor.empty() : tensor<f32>
  return %l : tensor<f32>
}
// expected-error @+1 {{'func.func' op trainer-entry-point: the module already has @loom_step}}
func.func @loom_step() {
  return
}

// -----

// expected-error @+1 {{'train.tied_results' ties result #0 to argument #3 of 1 (-1: none)}}
func.func @bad_tie(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss})
    attributes {train.tied_results = array<i64: 3>} {
  %l = tensor.empty() : tensor<f32>
  return %l : tensor<f32>
}
