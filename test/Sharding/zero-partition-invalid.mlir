// Tests zero-partition's diagnostics for inputs that are not training steps
// and for bad options.
// RUN: not loom-opt %s -split-input-file -zero-partition="world-size=4" 2>&1 | FileCheck %s
// RUN: not loom-opt %s -zero-partition="stage=4 world-size=4" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not loom-opt %s -zero-partition 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not loom-opt %s -zero-partition="world-size=2 reduction=max" 2>&1 | FileCheck %s --check-prefix=REDUCTION
// RUN: not loom-opt %s -split-input-file -zero-partition="stage=1 world-size=4" 2>&1 | FileCheck %s --check-prefix=STAGE1

// STAGE: error: zero-partition: expected stage 1, 2 or 3, got 4
// WORLD: error: zero-partition: expected world-size >= 1, got 0
// REDUCTION: error: zero-partition: expected reduction avg or sum, got 'max'

// CHECK: error: 'func.func' op is not a training step: it has a train.loss result but no train.param argument
func.func @no_params(%x: tensor<f32> {train.input}) -> (tensor<f32> {train.loss}) {
  return %x : tensor<f32>
}

// -----

// CHECK: error: 'func.func' op world size 4 does not match the communicator argument #1 of type '!coll.comm<8>'
func.func @comm_mismatch(%w: tensor<f32> {train.param = "w"}, %c: !coll.comm<8>) -> (tensor<f32> {train.loss}, tensor<f32> {train.grad = "w"}) {
  return %w, %w : tensor<f32>, tensor<f32>
}

// -----

// CHECK: error: 'coll.comm_world' op world size 4 does not match this communicator of type '!coll.comm<2>'
// Stages 1 and 2 keep the parameter whole, so its gradient cannot be
// returned as a shard.
// STAGE1: error: 'func.func' op returns gradients (result #1) but stage 1 keeps parameters whole; run train-optimizer first, or use stage 3
func.func @world_mismatch(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
  %c = coll.comm_world : !coll.comm<2>
  %l = tensor.empty() : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// CHECK: error: zero-partition: expected a training step (a function with a train.loss result), found none
func.func @no_loss(%w: tensor<4xf32> {train.param = "w"}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// A parameter whose element count overflows int64 would get zero-sized
// shards.
// CHECK: error: zero-partition: expected static shapes that fit in 64 bits, got 'tensor<4294967296x4294967296xf32>'
func.func @overflow(%w: tensor<4294967296x4294967296xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %l = tensor.empty() : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Stage 3 shards the parameter: the step cannot return it as it came.
// CHECK: error: 'func.func' op returns parameter argument #0 itself; zero-partition stage 3 shards it, so the step must return its update (run train-optimizer first)
func.func @returns_param(%w: tensor<8xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<8xf32> {train.grad = "w"}) {
  %l = tensor.empty() : tensor<f32>
  return %l, %w : tensor<f32>, tensor<8xf32>
}

// -----

// A 0-d parameter has nothing to shard, so its gradient would never be
// reduced across the ranks.
// CHECK: error: 'func.func' op parameter argument #0 is 0-d; zero-partition shards parameters of rank >= 1 (make it tensor<1x...>)
func.func @scalar_param(%w: tensor<f32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<f32> {train.grad = "w"}) {
  return %w, %w : tensor<f32>, tensor<f32>
}

// -----

// A pipeline's stage is sharded over its replicas: world-size must be the
// pipeline's replica count.
// CHECK: error: 'func.func' op world-size 4 does not match the pipeline's 2 data-parallel replicas (pp-partition{replicas}): a stage is sharded over its replicas
func.func @stage_replicas(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<4xf32> {train.param = "w"}) attributes {train.pipeline = #train.pipeline<stages = 2, microbatches = 1, replicas = 2, schedule = "1f1b", layout = "t|L">, train.pipeline_stage = 0 : i64} {
  return %w : tensor<4xf32>
}

// -----

// CHECK: error: 'func.func' op is a pipeline stage: zero-partition shards stages at ZeRO stage 1 or 2 (stage 3 would gather each parameter once per microbatch)
func.func @stage_zero3(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<4xf32> {train.param = "w"}) attributes {train.pipeline = #train.pipeline<stages = 2, microbatches = 1, replicas = 4, schedule = "1f1b", layout = "t|L">, train.pipeline_stage = 1 : i64} {
  return %w : tensor<4xf32>
}

// -----

// CHECK: error: 'func.func' op is a pipeline stage (train.pipeline_stage) without train.pipeline's stages and replicas
func.func @stage_without_grid(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<4xf32> {train.param = "w"}) attributes {train.pipeline_stage = 0 : i64} {
  return %w : tensor<4xf32>
}

// -----

// Sharding changes the step's signature, which its callers would not match.
// CHECK: error: zero-partition: @called is called in the module; shard a training step before anything calls it (loomc makes the trainer's entry point after sharding)
func.func @called(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<4xf32> {train.input = "x"}) -> (tensor<f32> {train.loss}) {
  %l = tensor.extract_slice %x[0] [1] [1] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}
func.func @caller(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
  %l = call @called(%w, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
