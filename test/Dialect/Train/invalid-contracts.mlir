// Tests that the contracts training passes hand each other (microbatches,
// pipeline stages and actions, the ZeRO stage, full shapes, footprints, the
// trainer's manifest) are checked by the train dialect: each breach below is
// rejected when the IR is read, not by the pass that would have trusted it.
// RUN: loom-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{expected 'train.microbatches' in [1, inf) (the microbatches), got 0}}
func.func private @no_microbatches() attributes {train.microbatches = 0 : i64}

// -----

func.func @microbatch_out_of_range(%x: tensor<4xf32>) -> tensor<4xf32> attributes {train.microbatches = 2 : i64} {
  // expected-error @+1 {{expected 'train.microbatch' in [0, 2) (below the function's microbatches), got 7}}
  %0 = math.exp %x {train.microbatch = 7 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @microbatch_not_i64(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected 'train.microbatch' to be an i64 (a microbatch), got "0"}}
  %0 = math.exp %x {train.microbatch = "0"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{'train.microbatches' is only valid on a function}}
module attributes {train.microbatches = 2 : i64} {}

// -----

// expected-error @+1 {{expected 'train.zero_stage' in [1, 4) (the ZeRO stage), got 4}}
func.func private @zero_stage_four() attributes {train.zero_stage = 4 : i64}

// -----

// expected-error @+1 {{expected the schedule gpipe, 1f1b or zb-h1, got "interleaved"}}
func.func private @bad_schedule() attributes {train.pipeline = #train.pipeline<stages = 2, microbatches = 4, replicas = 1, schedule = "interleaved", layout = "t|tL">, train.pipeline_stage = 0 : i64}

// -----

// expected-error @+1 {{expected stages, microbatches and replicas >= 1, got 0, 4 and 1}}
func.func private @no_stages() attributes {train.pipeline = #train.pipeline<stages = 0, microbatches = 4, replicas = 1, schedule = "1f1b", layout = "">, train.pipeline_stage = 0 : i64}

// -----

// expected-error @+1 {{expected 'train.pipeline_stage' in [0, 2) (below the pipeline's stages), got 2}}
func.func private @stage_past_the_end() attributes {train.pipeline = #train.pipeline<stages = 2, microbatches = 4, replicas = 1, schedule = "1f1b", layout = "t|tL">, train.pipeline_stage = 2 : i64}

// -----

// expected-error @+1 {{expected 'train.pipeline_stage' beside 'train.pipeline'}}
func.func private @pipeline_without_stage() attributes {train.pipeline = #train.pipeline<stages = 2, microbatches = 4, replicas = 1, schedule = "1f1b", layout = "t|tL">}

// -----

// expected-error @+1 {{expected 'train.pipeline' to be a #train.pipeline, got {stages = 2 : i64}}}
func.func private @pipeline_dictionary() attributes {train.pipeline = {stages = 2 : i64}, train.pipeline_stage = 0 : i64}

// -----

func.func @stage_on_an_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'train.pipeline_stage' is only valid on a function or a module}}
  %0 = math.exp %x {train.pipeline_stage = 0 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @action_past_the_microbatches(%x: tensor<4xf32>) -> tensor<4xf32> attributes {train.pipeline = #train.pipeline<stages = 2, microbatches = 4, replicas = 1, schedule = "1f1b", layout = "t|tL">, train.pipeline_stage = 0 : i64} {
  // expected-error @+1 {{'train.action' "B4" names microbatch 4 of 4}}
  %0 = math.exp %x {train.action = "B4"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @action_unknown(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected 'train.action' to be a schedule action, F, B, I or W and a microbatch ("F3"), got "X1"}}
  %0 = math.exp %x {train.action = "X1"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expected 'train.id_bound' on argument #0 to be an i64 >= 1, got 0 : i64}}
func.func private @zero_bound(tensor<4xi32> {train.id_bound = 0 : i64, train.input = "tokens"})

// -----

// expected-error @+1 {{'train.id_bound' bounds the ids of an input of integers; argument #0 is 'tensor<4xf32>'}}
func.func private @bound_on_floats(tensor<4xf32> {train.id_bound = 8 : i64, train.input = "x"})

// -----

// expected-error @+1 {{'train.id_bound' bounds the ids of an input of integers; argument #0 is 'tensor<4xi32>'}}
func.func private @bound_on_a_parameter_less_arg(tensor<4xi32> {train.id_bound = 8 : i64})

// -----

// expected-error @+2 {{expected id_bound 0, or > 0 on an input of integers, got 8}}
// expected-error @+1 {{failed to parse Train_StepManifestAttr parameter 'tensors'}}
module attributes {train.step_manifest = #train.step_manifest<world_size = 1, zero_stage = 0, predicted_peak_bytes = 0, tensors = [#train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [4], id_bound = 8>]>} {
}

// -----

// expected-error @+1 {{'train.full_shape' array<i64: 2, 3> on argument #0 holds 6 elements, fewer than its type 'tensor<8xf32>' (8)}}
func.func private @shard_larger_than_whole(tensor<8xf32> {train.full_shape = array<i64: 2, 3>})

// -----

// expected-error @+1 {{expected 'train.full_shape' on result #0 to have sizes >= 0, got array<i64: -1>}}
func.func private @negative_size() -> (tensor<1xf32> {train.full_shape = array<i64: -1>})

// -----

// expected-error @+1 {{expected 'train.full_shape' on argument #0 to be a dense i64 array, got [2, 3]}}
func.func private @full_shape_list(tensor<2xf32> {train.full_shape = [2, 3]})

// -----

// A shard of a whole: ceil(6 / 4) = 2 of its 6 elements.
func.func private @shard(tensor<2xf32> {train.full_shape = array<i64: 2, 3>, train.param = "w"}) attributes {train.zero_stage = 3 : i64}

// -----

// expected-error @+1 {{expected 'train.optimizer' to be "adamw" or "sgd", got "lamb"}}
func.func private @unknown_optimizer() attributes {train.optimizer = "lamb"}

// -----

// expected-error @+1 {{expected 'train.lr' to be a finite f64 >= 0, got -1.000000e-03 : f64}}
func.func private @negative_lr() attributes {train.lr = -1.0e-3 : f64}

// -----

// expected-error @+1 {{expected 'train.tied_results' to be a dense i64 array of one entry per result (1), got array<i64: -1, 0>}}
func.func private @tied_count(tensor<4xf32>) -> tensor<4xf32> attributes {train.tied_results = array<i64: -1, 0>}

// -----

// expected-error @+1 {{'train.tied_results' ties result #0 to argument #3 of 1 (-1: none)}}
func.func private @tied_past_the_arguments(tensor<4xf32>) -> tensor<4xf32> attributes {train.tied_results = array<i64: 3>}

// -----

// expected-error @+1 {{expected 'train.arena_bytes' in [0, inf) (bytes), got -64}}
func.func private @negative_arena() attributes {train.arena_bytes = -64 : i64}

// -----

// expected-error @+1 {{'train.scheduled_peak_bytes' is only valid on a function}}
module attributes {train.scheduled_peak_bytes = 64 : i64} {}

// -----

// The figures of a planned step.
func.func private @planned(tensor<4xf32>) -> tensor<4xf32> attributes {train.optimizer = "adamw", train.lr = 1.0e-3 : f64, train.tied_results = array<i64: 0>, train.arena_bytes = 64 : i64, train.arena_bound_bytes = 64 : i64, train.timeline_peak_bytes = 80 : i64, train.scheduled_peak_bytes = 80 : i64, train.synchronous_peak_bytes = 80 : i64, train.packed_bytes = 0 : i64, train.packed_bound_bytes = 0 : i64}

// -----

func.func @footprint_count(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'train.footprint' has 2 in_place entries for 1 results}}
  %y = train.rms_norm %x, %w eps = 1.0e-05 {train.footprint = #train.footprint<scratch = 64, in_place = [-1, -1]>} : tensor<4x64xf32>, tensor<64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @footprint_type(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'train.footprint' writes result #0 into operand #1, which is not an operand of its type}}
  %y = train.rms_norm %x, %w eps = 1.0e-05 {train.footprint = #train.footprint<scratch = 64, in_place = [1]>} : tensor<4x64xf32>, tensor<64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @footprint_not_train(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'train.footprint' is only valid on a train op}}
  %y = arith.addf %x, %x {train.footprint = #train.footprint<scratch = 0, in_place = [-1]>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @footprint_negative(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{expected scratch >= 0 bytes, got -1}}
  %y = train.rms_norm %x, %w eps = 1.0e-05 {train.footprint = #train.footprint<scratch = -1, in_place = [-1]>} : tensor<4x64xf32>, tensor<64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// The trainer's manifest (trainer-entry-point): typed, on a module, and in
// agreement with @loom_step's buffers.

// expected-error @+1 {{'train.step_manifest' is only valid on a module}}
func.func private @manifest_on_func() attributes {train.step_manifest = #train.step_manifest<world_size = 1, zero_stage = 0, predicted_peak_bytes = 0, tensors = []>}

// -----

// expected-error @+1 {{expected 'train.step_manifest' to be a #train.step_manifest, got "loom-step 1"}}
module attributes {train.step_manifest = "loom-step 1"} {
}

// -----

// expected-error @+2 {{expected role param, state, input or loss, got "grad"}}
// expected-error @+1 {{failed to parse Train_StepManifestAttr parameter 'tensors'}}
module attributes {train.step_manifest = #train.step_manifest<world_size = 1, zero_stage = 0, predicted_peak_bytes = 0, tensors = [#train.manifest_tensor<kind = "arg", role = "grad", name = "w", type = tensor<4xf32>, full_shape = [4]>]>} {
}

// -----

// expected-error @+2 {{only a result is written in place}}
// expected-error @+1 {{failed to parse Train_StepManifestAttr parameter 'tensors'}}
module attributes {train.step_manifest = #train.step_manifest<world_size = 1, zero_stage = 0, predicted_peak_bytes = 0, tensors = [#train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [4], in_place = true>]>} {
}

// -----

// expected-error @+2 {{expected a static tensor of f32, f64, bf16, i32 or i64, got 'tensor<4xf16>'}}
// expected-error @+1 {{failed to parse Train_StepManifestAttr parameter 'tensors'}}
module attributes {train.step_manifest = #train.step_manifest<world_size = 1, zero_stage = 0, predicted_peak_bytes = 0, tensors = [#train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf16>, full_shape = [4]>]>} {
}

// -----

// expected-error @+2 {{expected full_shape array<i64: 3> to hold at least the local 'tensor<4xf32>'}}
// expected-error @+1 {{failed to parse Train_StepManifestAttr parameter 'tensors'}}
module attributes {train.step_manifest = #train.step_manifest<world_size = 2, zero_stage = 3, predicted_peak_bytes = 0, tensors = [#train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [3]>]>} {
}

// -----

// expected-error @+1 {{expected stage 2 below 2 stages, and stages x replicas (1) equal to the world size (2)}}
module attributes {train.step_manifest = #train.step_manifest<world_size = 2, zero_stage = 0, pipeline_stage = 2, pipeline_stages = 2, pipeline_replicas = 1, predicted_peak_bytes = 0, tensors = []>} {
}

// -----

// expected-error @+1 {{expected the arguments before the results}}
module attributes {train.step_manifest = #train.step_manifest<world_size = 1, zero_stage = 0, predicted_peak_bytes = 0, tensors = [#train.manifest_tensor<kind = "result", role = "loss", name = "loss", type = tensor<f32>, full_shape = []>, #train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [4]>]>} {
}

// -----

// expected-error @+1 {{'train.step_manifest' describes buffer #1 as 'tensor<f32>', but @loom_step takes 'memref<4xf32>'}}
module attributes {train.step_manifest = #train.step_manifest<world_size = 1, zero_stage = 0, predicted_peak_bytes = 0, tensors = [#train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [4]>, #train.manifest_tensor<kind = "result", role = "loss", name = "loss", type = tensor<f32>, full_shape = []>]>} {
  func.func @loom_step(%w: memref<4xf32>, %l: memref<4xf32>) {
    return
  }
}

// -----

// expected-error @+1 {{'train.step_manifest' describes 1 tensors for the 2 buffers of @loom_step}}
module attributes {train.step_manifest = #train.step_manifest<world_size = 1, zero_stage = 0, predicted_peak_bytes = 0, tensors = [#train.manifest_tensor<kind = "arg", role = "param", name = "w", type = tensor<4xf32>, full_shape = [4]>]>} {
  func.func @loom_step(%w: memref<4xf32>, %l: memref<f32>) {
    return
  }
}
