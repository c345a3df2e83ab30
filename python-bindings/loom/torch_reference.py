"""A PyTorch implementation of the Llama model loom.models.llama builds.

The reference for whole-model tests: the JIT-evaluated step
(test/Numerics/llama_torch.py) and the compiled trainers
(test/Integration/trainers.py). It is written from the model's definition
(RMSNorm, RoPE with rotate-half, causal grouped-query attention, SwiGLU,
cross-entropy with ignore_index -100, label smoothing and z-loss), not from
Loom's decompositions, so the two check each other. Needs torch (Debian's
python3-torch, for /usr/bin/python3).
"""

from __future__ import annotations

import math

import numpy as np
import torch


def llama_loss(cfg, p: dict, tokens: np.ndarray, labels: np.ndarray) -> torch.Tensor:
    """Mean loss over the non-ignored labels; `p` maps parameter names to tensors."""
    hd, batch, seq = cfg.head_dim, tokens.shape[0], tokens.shape[1]
    n = batch * seq

    def rms(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg.norm_eps) * w

    inv = cfg.rope_theta ** (-torch.arange(hd // 2, dtype=torch.float64) * 2.0 / hd)
    ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None]
    cos, sin = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]

    def rope(x):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    x = p["embed"][torch.from_numpy(np.asarray(tokens)).long()]
    mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
    group = cfg.heads // cfg.kv_heads
    for i in range(cfg.layers):
        q_ = lambda s: p[f"layers.{i}.{s}"]  # noqa: E731
        h = rms(x, q_("attn_norm"))
        q = rope((h @ q_("attn.wq").T).view(batch, seq, cfg.heads, hd))
        k = rope((h @ q_("attn.wk").T).view(batch, seq, cfg.kv_heads, hd))
        v = (h @ q_("attn.wv").T).view(batch, seq, cfg.kv_heads, hd)
        k, v = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
        s = torch.einsum("bshd,bthd->bhst", q, k) / math.sqrt(hd)
        s = s.masked_fill(~mask, float("-inf"))
        o = torch.einsum("bhst,bthd->bshd", torch.softmax(s, -1), v).reshape(batch, seq, cfg.dim)
        x = x + o @ q_("attn.wo").T
        h = rms(x, q_("mlp_norm"))
        g = h @ q_("mlp.w_gate").T
        x = x + (torch.nn.functional.silu(g) * (h @ q_("mlp.w_up").T)) @ q_("mlp.w_down").T
    logits = (rms(x, p["norm"]) @ p["output"].T).reshape(n, cfg.vocab)
    y = torch.from_numpy(np.asarray(labels)).long().reshape(n)
    ce = torch.nn.functional.cross_entropy(logits, y, ignore_index=-100, reduction="none",
                                           label_smoothing=cfg.label_smoothing)
    lse = torch.logsumexp(logits, -1)
    valid = y != -100
    per_token = torch.where(valid, ce + cfg.z_loss * lse * lse, torch.zeros_like(ce))
    return per_token.sum() / valid.sum()
