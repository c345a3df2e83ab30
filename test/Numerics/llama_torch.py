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
    p = dict(zip([name for name, _ in cfg.parameters()], weights))
    hd, n = cfg.head_dim, cfg.batch * cfg.seq

    def rms(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg.norm_eps) * w

    inv = cfg.rope_theta ** (-torch.arange(hd // 2, dtype=torch.float64) * 2.0 / hd)
    ang = torch.arange(cfg.seq, dtype=torch.float64)[:, None] * inv[None]
    cos, sin = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]

    def rope(x):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    x = p["embed"][torch.from_numpy(tokens).long()]
    mask = torch.tril(torch.ones(cfg.seq, cfg.seq, dtype=torch.bool))
    group = cfg.heads // cfg.kv_heads
    for i in range(cfg.layers):
        q_ = lambda s: p[f"layers.{i}.{s}"]  # noqa: E731
        h = rms(x, q_("attn_norm"))
        q = rope((h @ q_("attn.wq").T).view(cfg.batch, cfg.seq, cfg.heads, hd))
        k = rope((h @ q_("attn.wk").T).view(cfg.batch, cfg.seq, cfg.kv_heads, hd))
        v = (h @ q_("attn.wv").T).view(cfg.batch, cfg.seq, cfg.kv_heads, hd)
        k, v = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
        s = torch.einsum("bshd,bthd->bhst", q, k) / math.sqrt(hd)
        s = s.masked_fill(~mask, float("-inf"))
        o = torch.einsum("bhst,bthd->bshd", torch.softmax(s, -1), v).reshape(cfg.batch, cfg.seq, cfg.dim)
        x = x + o @ q_("attn.wo").T
        h = rms(x, q_("mlp_norm"))
        g = h @ q_("mlp.w_gate").T
        x = x + (torch.nn.functional.silu(g) * (h @ q_("mlp.w_up").T)) @ q_("mlp.w_down").T
    logits = (rms(x, p["norm"]) @ p["output"].T).reshape(n, cfg.vocab)
    y = torch.from_numpy(labels).long().reshape(n)
    ce = torch.nn.functional.cross_entropy(logits, y, ignore_index=-100, reduction="none",
                                           label_smoothing=cfg.label_smoothing)
    lse = torch.logsumexp(logits, -1)
    valid = y != -100
    per_token = torch.where(valid, ce + cfg.z_loss * lse * lse, torch.zeros_like(ce))
    return per_token.sum() / valid.sum()


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
