# Tests the whole tiny Llama against PyTorch: the forward loss and the gradient
# of every parameter from `train-autodiff` (f32, run by loom-run) against
# PyTorch autograd in f64, and three AdamW steps from `train-optimizer` against
# torch.optim.AdamW. Label smoothing, z-loss and ignored labels are on.
# REQUIRES: torch
# RUN: %python %s | FileCheck %s
# CHECK: loss: loom {{[0-9.]+}} torch {{[0-9.]+}}
# CHECK: 21 gradients: worst relative error
# CHECK: 21 parameters after 3 AdamW steps: worst relative error
# CHECK-NOT: FAIL
# CHECK: tiny llama matches pytorch

import dataclasses
import math
import sys

import numpy as np
import torch

from loom.models.llama import CONFIGS, build_forward
from loom.torch_reference import llama_loss
from loom.opt import run_opt
from loom.testing import run_function

TOLERANCE = 1e-4
cfg = dataclasses.replace(CONFIGS["tiny"], label_smoothing=0.1, z_loss=1e-3)
rng = np.random.default_rng(2026)
params = []
for name, shape in cfg.parameters():
    scale = 1.0 if name.endswith("norm") else 1.0 / math.sqrt(shape[-1])
    value = rng.standard_normal(shape) * scale + (1.0 if name.endswith("norm") else 0.0)
    params.append(value.astype(np.float32))
tokens = rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq)).astype(np.int32)
labels = np.roll(tokens, -1, axis=1)
labels[:, -1] = -100
labels[0, :5] = -100


def torch_loss(weights):
    return llama_loss(cfg, dict(zip([name for name, _ in cfg.parameters()], weights)), tokens, labels)


failures = 0


def report(name, got, want, quiet=False):
    """Norm-wise relative error; prints failures always, the rest unless quiet."""
    global failures
    err = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
    ok = err < TOLERANCE
    failures += not ok
    if not ok or not quiet:
        print(f"{'ok' if ok else 'FAIL'} {name}: relative error {err:.2e}")
    return err


# Loss and gradients.
reference = [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in params]
loss = torch_loss(reference)
loss.backward()
forward = build_forward(cfg)
step = run_opt(forward, ["--train-autodiff"])
results = run_function(step, "forward", params + [tokens, labels])
print(f"loss: loom {float(results[0]):.6f} torch {float(loss):.6f}")
report("loss", np.array(results[0]), loss.detach().numpy())
worst = max(report(name, got, ref.grad.numpy(), quiet=True)
            for (name, _), got, ref in zip(cfg.parameters(), results[1:], reference))
print(f"{len(results) - 1} gradients: worst relative error {worst:.2e}")

# Three AdamW steps (weight decay on) through train-optimizer.
lr, wd = 1e-2, 0.1
trainer = run_opt(forward, ["--train-autodiff", f"--train-optimizer=kind=adamw lr={lr} weight-decay={wd}"])
torch_params = [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in params]
optimizer = torch.optim.AdamW(torch_params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd)
state = [np.zeros((), np.float32)] + [np.zeros_like(w) for w in params for _ in range(2)]
current = list(params)
count = len(params)
for step_index in range(3):
    out = run_function(trainer, "forward", current + state + [tokens, labels])
    current, state = out[1:1 + count], out[1 + count:]
    optimizer.zero_grad()
    torch_loss(torch_params).backward()
    optimizer.step()
worst = max(report(f"after 3 AdamW steps {name}", got, ref.detach().numpy(), quiet=True)
            for (name, _), got, ref in zip(cfg.parameters(), current, torch_params))
print(f"{count} parameters after 3 AdamW steps: worst relative error {worst:.2e}")
report("AdamW step counter", np.array(state[0]), np.array(3.0))

print("FAIL" if failures else "tiny llama matches pytorch")
sys.exit(1 if failures else 0)
