// Tests pp-partition's diagnostics: each names what is wrong and the pass
// fails without changing the module.
// RUN: not loom-opt %s --loom-set-target=device=cpu --pp-partition=stages=2 2>&1 | FileCheck %s --check-prefix=FORWARD
// RUN: not loom-opt %s --loom-set-target=device=cpu --pp-partition="stages=2 forward-only" 2>&1 | FileCheck %s --check-prefix=NOLAYOUT
// RUN: not loom-opt %s --train-autodiff --loom-set-target=device=cpu --pp-partition="stages=2 forward-only layout=t|tL" 2>&1 | FileCheck %s --check-prefix=NOTFORWARD
// RUN: not loom-opt %s --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 schedule=interleaved" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not loom-opt %s --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=4" 2>&1 | FileCheck %s --check-prefix=UNITS
// RUN: not loom-opt %s --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 layout=t|t" 2>&1 | FileCheck %s --check-prefix=LAYOUT
// RUN: not loom-opt %s --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=3 layout=t|tL" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not loom-opt %s --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 layout=t|tX" 2>&1 | FileCheck %s --check-prefix=TOKEN
// RUN: not loom-opt %s --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 layout=t*0|tL" 2>&1 | FileCheck %s --check-prefix=REPEAT
// RUN: not loom-opt %s --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=0" 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not loom-opt %s --train-autodiff --train-optimizer="kind=sgd lr=0.1" --zero-partition="stage=1 world-size=2" --loom-set-target=device=cpu --pp-partition="stages=2" 2>&1 | FileCheck %s --check-prefix=SHARDED
// RUN: loom-opt %s --train-microbatch=microbatches=2 --train-autodiff --train-optimizer="kind=sgd lr=0.1" | sed -e 's/train.microbatch = 1 : i64/train.microbatch = 7 : i64/' | not loom-opt --loom-set-target=device=cpu --pp-partition=stages=2 2>&1 | FileCheck %s --check-prefix=MBRANGE
// RUN: not loom-opt %S/Inputs/grad-elsewhere.mlir --loom-set-target=device=cpu --pp-partition="stages=2 layout=t|tL" 2>&1 | FileCheck %s --check-prefix=GRADSTAGE
// RUN: not loom-opt %S/Inputs/unknown-ops.mlir --allow-unregistered-dialect --split-input-file --loom-set-target=device=cpu --pp-partition=stages=2 2>&1 | FileCheck %s --check-prefixes=UNKNOWN,TERMINATOR

// UNKNOWN: error: 'foo.mm' op pp-partition: cannot place an op with side effects
// TERMINATOR: error: pp-partition: expected the step to end in func.return, found 'foo.return'
// MBRANGE: error: 'tensor.extract_slice' op expected 'train.microbatch' in [0, 2) (below the function's microbatches), got 7
// FORWARD: error: pp-partition: expected a differentiated step (run train-autodiff, and train-optimizer, first)
// NOLAYOUT: error: pp-partition: forward-only needs the training step's layout, so that each stage holds the parameters it trains
// NOTFORWARD: error: pp-partition: forward-only partitions a forward, and this step returns gradients
// SCHEDULE: error: pp-partition: unknown schedule 'interleaved' (expected gpipe, 1f1b or zb-h1)
// UNITS: error: pp-partition: the step has 3 units (embedding, blocks, output) for 4 stages
// LAYOUT: error: pp-partition: layout "t|t" lists units "tt", the step has "ttL"
// COUNT: error: pp-partition: layout "t|tL" has 2 stages, expected 3
// TOKEN: error: pp-partition: unknown unit 'X' in layout "t|tX" (expected E, t, L, *N and |)
// REPEAT: error: pp-partition: expected a positive count after '*' in layout "t*0|tL"
// STAGES: error: pp-partition: stages and replicas must be at least 1, got 0 and 1
// SHARDED: error: pp-partition: the step already has collectives; pp-partition runs before zero-partition

func.func @mlp(%w0: tensor<8x8xf32> {train.param = "layers.0.w"},
               %w1: tensor<8x8xf32> {train.param = "layers.1.w"},
               %head: tensor<4x8xf32> {train.param = "head"},
               %x: tensor<4x8xf32> {train.input = "x"},
               %labels: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h0 = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h1 = linalg.matmul ins(%h0, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %el = tensor.empty() : tensor<4x4xf32>
  %zl = linalg.fill ins(%zero : f32) outs(%el : tensor<4x4xf32>) -> tensor<4x4xf32>
  %logits = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%h1, %head : tensor<4x8xf32>, tensor<4x8xf32>) outs(%zl : tensor<4x4xf32>) -> tensor<4x4xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<4x4xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// A returned gradient whose location puts it on another stage than its
// parameter's.
// GRADSTAGE: error: loc("head"): 'linalg.generic' op pp-partition: the gradient of parameter 'layers.0.w' is computed on stage 1, its parameter is on stage 0
