// Tests zero-selective-gather: parameters gathered in the forward and again
// in the backward keep their forward copy when it fits the budget, most
// gather time per byte first (small, latency-bound parameters).
// RUN: loom-opt %s -train-autodiff -train-optimizer="kind=sgd lr=0.1" -zero-partition="stage=3 world-size=4" | grep -c all_gather_start | FileCheck %s --check-prefix=NONE
// RUN: loom-opt %s -train-autodiff -train-optimizer="kind=sgd lr=0.1" -zero-partition="stage=3 world-size=4" --loom-set-target=device=h100-nvlink -zero-selective-gather="budget-mb=0.02" | grep -c all_gather_start | FileCheck %s --check-prefix=SMALLCOUNT
// RUN: loom-opt %s -train-autodiff -train-optimizer="kind=sgd lr=0.1" -zero-partition="stage=3 world-size=4" --loom-set-target=device=h100-nvlink -zero-selective-gather="budget-mb=1" | grep -c all_gather_start | FileCheck %s --check-prefix=ALLCOUNT
// RUN: loom-opt %s -train-autodiff -train-optimizer="kind=sgd lr=0.1" -zero-partition="stage=3 world-size=4" --loom-set-target=device=h100-nvlink -zero-selective-gather="budget-mb=0.02" | FileCheck %s --check-prefix=SMALL
// RUN: loom-opt %s -train-autodiff -train-optimizer="kind=sgd lr=0.1" -zero-partition="stage=3 world-size=4" --loom-set-target=device=h100-nvlink -zero-selective-gather="budget-mb=1" | FileCheck %s --check-prefix=ALL
// RUN: not loom-opt %s -zero-selective-gather="budget-mb=1" 2>&1 | FileCheck %s --check-prefix=NOTARGET

// NOTARGET: error: zero-selective-gather: the module has no target (train.target); run loom-set-target{device=<name>} first

// loss = sum(a^2) + sum(b^2) + sum(c^2). Gathered sizes over 4 ranks:
// a 16 B, b 16 KiB, c 256 KiB; a budget of 0.02 MiB (20,971 B) holds a and b.
func.func @step(%a: tensor<4xf32> {train.param = "a"}, %b: tensor<64x64xf32> {train.param = "b"},
                %c: tensor<256x256xf32> {train.param = "c"}) -> (tensor<f32> {train.loss}) {
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %sa = linalg.reduce ins(%a : tensor<4xf32>) outs(%f : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %sq = arith.mulf %in, %in : f32
      %s = arith.addf %sq, %acc : f32
      linalg.yield %s : f32
    }
  %sb = linalg.reduce ins(%b : tensor<64x64xf32>) outs(%sa : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %sq = arith.mulf %in, %in : f32
      %s = arith.addf %sq, %acc : f32
      linalg.yield %s : f32
    }
  %sc = linalg.reduce ins(%c : tensor<256x256xf32>) outs(%sb : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %sq = arith.mulf %in, %in : f32
      %s = arith.addf %sq, %acc : f32
      linalg.yield %s : f32
    }
  return %sc : tensor<f32>
}

// Without selective gather every parameter is gathered twice; with the small
// budget only c is gathered again; with 1 MiB none is.
// NONE: 6
// SMALLCOUNT: 4
// ALLCOUNT: 3

// With the small budget, a and b keep their forward copies: their gathers
// are released only after the backward has used them.
// SMALL: %[[FA:.+]] = coll.all_gather_start %arg0
// SMALL: %[[A:.+]] = coll.wait %[[FA]]
// SMALL: %[[FB:.+]] = coll.all_gather_start %arg1
// SMALL: %[[B:.+]] = coll.wait %[[FB]]
// SMALL: coll.all_gather_start %arg2
// SMALL: coll.release
// SMALL: coll.all_gather_start %arg2
// SMALL-NOT: coll.all_gather_start %arg0
// SMALL-NOT: coll.all_gather_start %arg1
// SMALL-DAG: coll.release %[[A]]
// SMALL-DAG: coll.release %[[B]]

// A budget of 1 MiB keeps all three.
// ALL-COUNT-1: coll.all_gather_start %arg2
// ALL-NOT: coll.all_gather_start %arg2
