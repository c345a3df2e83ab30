// Tests train-microbatch: ops that carry the batch are cloned per
// microbatch at half the batch (the inits found from their users), and the
// loss becomes the microbatches' sums over the whole batch's valid labels.
// RUN: loom-opt %s --train-microbatch=microbatches=2 | FileCheck %s
// RUN: loom-opt %s --train-microbatch=microbatches=1 | FileCheck %s --check-prefix=ONE
// RUN: not loom-opt %s --train-microbatch=microbatches=3 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not loom-opt %s --train-microbatch=microbatches=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not loom-opt %s --train-microbatch=microbatches=2 --train-microbatch=microbatches=2 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not loom-opt %S/Inputs/batch-reduction.mlir --train-microbatch=microbatches=2 --split-input-file 2>&1 | FileCheck %s --check-prefixes=REDUCE,NOTCE,CONST
// RUN: not loom-opt %S/Inputs/batch-reduction.mlir --train-microbatch=microbatches=2 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not loom-opt %S/Inputs/hostile-forwards.mlir --allow-unregistered-dialect --split-input-file --train-microbatch=microbatches=2 2>&1 | FileCheck %s --check-prefixes=PARAM,TERMINATOR

// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: train.microbatches = 2 : i64
// CHECK: %[[X0:.+]] = tensor.extract_slice %arg3[0, 0] [2, 8] [1, 1] {train.microbatch = 0 : i64} : tensor<4x8xf32> to tensor<2x8xf32>
// CHECK: %[[L0:.+]] = tensor.extract_slice %arg4[0] [2] [1] {train.microbatch = 0 : i64} : tensor<4xi32> to tensor<2xi32>
// CHECK: %[[E0:.+]] = tensor.empty() {train.microbatch = 0 : i64} : tensor<2x8xf32>
// CHECK: linalg.matmul {train.microbatch = 0 : i64} ins(%[[X0]], %arg0 : tensor<2x8xf32>, tensor<8x8xf32>)
// CHECK: %[[S0:.+]] = train.cross_entropy %{{.+}}, %[[L0]] ignore_index = -100 reduction = <sum>{{.*}}{train.microbatch = 0 : i64} : tensor<2x4xf32>, tensor<2xi32> -> tensor<f32>
// CHECK: tensor.extract_slice %arg3[2, 0] [2, 8] [1, 1] {train.microbatch = 1 : i64}
// CHECK: %[[S1:.+]] = train.cross_entropy {{.*}}reduction = <sum>{{.*}}{train.microbatch = 1 : i64}
// CHECK: %[[SUM:.+]] = linalg.generic {{.*}} ins(%[[S0]], %[[S1]] : tensor<f32>, tensor<f32>)
// CHECK: arith.cmpi ne, %{{.+}}, %{{.+}} : i32
// CHECK: %[[LOSS:.+]] = linalg.generic {{.*}} ins(%[[SUM]], %{{.+}} : tensor<f32>, tensor<f32>)
// CHECK: arith.maximumf
// CHECK: arith.divf
// CHECK: return %[[LOSS]] : tensor<f32>

// ONE-NOT: train.microbatch
// ONE: reduction = <mean>

// DIVIDE: error: train-microbatch: the batch of input #3 (4) is not divisible into 3 microbatches
// ZERO: error: train-microbatch: microbatches must be at least 1, got 0
// TWICE: error: train-microbatch: @mlp is already split into microbatches
// REDUCE: error: 'linalg.generic' op train-microbatch: a result reads the batch but has no batch dimension (a reduction over the batch); only the loss may
// TWO: error: train-microbatch: expected one forward (a function with a train.loss result), found @batch_mean and @square
// NOTCE: error: train-microbatch: the loss must be the result of train.cross_entropy or train.linear_cross_entropy, or scalar ops on one sum over the batch (a mean squared error), so that it can be summed over microbatches
// CONST: error: 'arith.constant' op train-microbatch: a constant carries the batch; compute it from the inputs instead
// PARAM: error: train-microbatch: argument #1 is not a train.input but carries the batch (dimension 0 of 'tensor<4x8xf32>')
// TERMINATOR: error: train-microbatch: expected @unknown_terminator to end in func.return, found 'foo.return'

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
