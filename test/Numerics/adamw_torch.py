# Tests train-optimizer's AdamW update against torch.optim.AdamW on exact
# gradients: for loss = sum(w * c) the gradient is c, bit for bit, so the
# two differ only by the optimizer's arithmetic. From w = 0, each step moves
# w by about lr, so an error in the bias corrections shows at full size
# (rounding beta2 = 0.999 to f32 before 1 - beta2^t makes the first step
# 6.5e-6 off); what is left is f32 rounding.
# REQUIRES: torch
# RUN: %python %s | FileCheck %s
# CHECK: AdamW, 8 steps from 0: worst relative error of the update {{.*}} (bound 2e-06)
# CHECK-NOT: FAIL
# CHECK: adamw matches torch

import sys

import numpy as np
import torch

from loom.opt import run_opt
from loom.testing import run_function

N, STEPS, LR, WD = 4096, 8, 1e-3, 0.01
BOUND = 2e-6
FORWARD = f"""
func.func @forward(%w: tensor<{N}xf32> {{train.param = "w"}}, %c: tensor<{N}xf32>)
    -> (tensor<f32> {{train.loss}}) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{N}xf32>
  %p = linalg.mul ins(%w, %c : tensor<{N}xf32>, tensor<{N}xf32>) outs(%e : tensor<{N}xf32>) -> tensor<{N}xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s1 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %s = linalg.reduce ins(%p : tensor<{N}xf32>) outs(%s1 : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {{
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }}
  return %s : tensor<f32>
}}
"""

rng = np.random.default_rng(26)
grads = [rng.standard_normal(N).astype(np.float32) for _ in range(STEPS)]
trainer = run_opt(FORWARD, ["--train-autodiff",
                            f"--train-optimizer=kind=adamw lr={LR} weight-decay={WD}"])
w = np.zeros(N, np.float32)
state = [np.zeros((), np.float32), np.zeros(N, np.float32), np.zeros(N, np.float32)]

# The reference in f64 on the same gradients.
ref = torch.zeros(N, dtype=torch.float64, requires_grad=True)
optimizer = torch.optim.AdamW([ref], lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WD)

failures, worst = 0, 0.0
for step, c in enumerate(grads):
    before = ref.detach().clone().numpy()
    out = run_function(trainer, "forward", [w, state[0], state[1], state[2], c])
    w, state = out[1], out[2:]
    ref.grad = torch.tensor(c, dtype=torch.float64)
    optimizer.step()
    want = ref.detach().numpy()
    # The update of this step, from the reference's previous parameters.
    error = float(np.linalg.norm(w.astype(np.float64) - want) / np.linalg.norm(want - before))
    worst = max(worst, error)
    if error > BOUND:
        failures += 1
        print(f"FAIL step {step + 1}: relative error of the update {error:.2e}")
print(f"AdamW, {STEPS} steps from 0: worst relative error of the update {worst:.2e} "
      f"(bound {BOUND:g})")
print("FAIL" if failures else "adamw matches torch")
sys.exit(1 if failures else 0)
