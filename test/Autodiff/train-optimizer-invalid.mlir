// Tests train-optimizer's diagnostics for bad options and inputs that are not
// training steps.
// RUN: not loom-opt %s -train-optimizer="kind=adam" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not loom-opt %s -train-optimizer="lr=-1" 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not loom-opt %s -train-optimizer 2>&1 | FileCheck %s --check-prefix=NOGRAD
// RUN: not loom-opt %S/Inputs/step-with-state.mlir -train-optimizer 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not loom-opt %S/Inputs/planned-step.mlir -train-optimizer 2>&1 | FileCheck %s --check-prefix=PLANNED

// KIND: error: train-optimizer: expected kind adamw or sgd, got 'adam'
// LR: error: train-optimizer: expected lr > 0, beta1 and beta2 in [0, 1), eps > 0 and weight-decay >= 0, got lr=-1
// NOGRAD: error: 'func.func' op has a loss but no gradients; run train-autodiff before train-optimizer
// A second optimizer would add a second "step" counter.
// TWICE: error: 'func.func' op already has optimizer state (argument #1); train-optimizer runs once, on train-autodiff's output
// PLANNED: error: 'func.func' op is a planned step (train.tied_results, from codegen-update-in-place); train-optimizer runs on the differentiated forward
func.func @forward(%w: tensor<f32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  return %w : tensor<f32>
}
