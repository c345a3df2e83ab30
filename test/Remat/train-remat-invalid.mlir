// Tests train-remat's diagnostics: a budget below the smallest peak any
// candidate reaches names that peak; bad options (activation-budget outside
// [0, 1] too); a module without a
// training step; a step without layers; a step that does not end in
// func.return. Ops of an unknown dialect are kept, not recomputed.
// RUN: loom-opt %S/train-remat.mlir -train-autodiff -zero-partition="stage=3 world-size=2" -o %t.step.mlir
// RUN: not loom-opt %t.step.mlir --loom-set-target=device=h100-nvlink -train-remat="budget-mb=0.2" 2>&1 | FileCheck %s --check-prefix=FLOOR
// RUN: not loom-opt %t.step.mlir --loom-set-target=device=h100-nvlink -train-remat="budget-mb=0.2 solver=chain" 2>&1 | FileCheck %s --check-prefix=FLOOR
// RUN: not loom-opt %t.step.mlir --loom-set-target=device=h100-nvlink -train-remat="solver=greedy" 2>&1 | FileCheck %s --check-prefix=SOLVER
// RUN: not loom-opt %t.step.mlir --loom-set-target=device=h100-nvlink -train-remat="budget-mb=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not loom-opt %t.step.mlir --loom-set-target=device=h100-nvlink -train-remat="time-limit-s=0 budget-mb=0.3" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not loom-opt %t.step.mlir --loom-set-target=device=h100-nvlink -train-remat="solver=knapsack" 2>&1 | FileCheck %s --check-prefix=KNAPSACK
// RUN: not loom-opt %t.step.mlir -train-remat="budget-mb=0.3" 2>&1 | FileCheck %s --check-prefix=NOTARGET
// RUN: echo 'func.func @f(%%x: tensor<4xf32>) -> tensor<4xf32> { return %%x : tensor<4xf32> }' | not loom-opt --loom-set-target=device=h100-nvlink -train-remat="budget-mb=1" 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: loom-opt %s -train-autodiff -o %t.nolayers.mlir
// RUN: not loom-opt %t.nolayers.mlir --loom-set-target=device=h100-nvlink -train-remat="budget-mb=0.00001" 2>&1 | FileCheck %s --check-prefix=NOLAYERS
// RUN: not loom-opt %t.nolayers.mlir --loom-set-target=device=h100-nvlink -train-remat="activation-budget=0.5" 2>&1 | FileCheck %s --check-prefix=NOLAYERS-ACT
// RUN: not loom-opt %t.step.mlir --loom-set-target=device=h100-nvlink -train-remat="activation-budget=1.5" 2>&1 | FileCheck %s --check-prefix=ACTIVATIONS
// RUN: not loom-opt %t.step.mlir --loom-set-target=device=h100-nvlink -train-remat="activation-budget=-0.1" 2>&1 | FileCheck %s --check-prefix=ACTIVATIONS
// RUN: not loom-opt %S/Inputs/unknown-ops.mlir --allow-unregistered-dialect --split-input-file --loom-set-target=device=h100-nvlink -train-remat="solver=every-layer" 2>&1 | FileCheck %s --check-prefixes=UNKNOWN,TERMINATOR

// FLOOR: error: train-remat: budget-mb=0.20 is below the smallest peak rematerialisation reaches, 0.26 MiB (keeping everything: 0.33 MiB)
// SOLVER: error: train-remat: expected solver ilp, chain, none, every-layer, sqrt or knapsack, got 'greedy'
// NEGATIVE: error: train-remat: expected budget-mb >= 0, time-limit-s > 0 and gap >= 0
// KNAPSACK: error: train-remat: the knapsack policy needs budget-mb (its activation budget)
// NOTARGET: error: train-remat: the module has no target (train.target); run loom-set-target{device=<name>} first
// NOSTEP: error: train-remat: expected a training step (a function with a train.loss result)
// UNKNOWN: remark: train-remat: every-layer recomputes 0 ops
// TERMINATOR: error: train-remat: expected the step to end in func.return, found 'foo.return'
// NOLAYERS-ACT: error: train-remat: activation-budget=0.500 is below the activations the step keeps at the loss, {{[0-9.]+}} MiB, and the step has no layers (train.param groups such as layers.0.*) to recompute
// ACTIVATIONS: error: train-remat: expected activation-budget in [0, 1], got
// NOLAYERS: error: train-remat: budget-mb=0.00 is below the step's peak, {{[0-9.]+}} MiB, and the step has no layers (train.param groups such as layers.0.*) to recompute

// A step whose one parameter is in no numbered group.
func.func @no_layers(%x: tensor<8x4xf32> {train.input = "x"},
                     %w: tensor<4x4xf32> {train.param = "w"},
                     %labels: tensor<8xi32> {train.input = "labels"})
    -> (tensor<f32> {train.loss}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %h = linalg.matmul ins(%x, %w : tensor<8x4xf32>, tensor<4x4xf32>)
                     outs(%f : tensor<8x4xf32>) -> tensor<8x4xf32>
  %loss = train.cross_entropy %h, %labels ignore_index = -100 reduction = <mean>
      label_smoothing = 0.0 z_loss = 0.0 : tensor<8x4xf32>, tensor<8xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
