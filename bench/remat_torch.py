"""PyTorch's side of `bench/remat --torch`: the same Llama as Loom's builder,
trained by torch.compile at each activation_memory_budget.

Run by a Python with PyTorch 2.4 or later (PyPI's; Debian's 1.13 has no
torch.compile): bench/remat starts it with --torch-python. For each budget
it compiles a fresh step (forward, backward and torch.optim.AdamW, on one
thread), and prints one JSON line: the budget, the bytes the compiled
forward saves for the backward (every tensor packed by autograd's saved-
tensor hooks, each storage once: what the min-cut partitioner decided to
keep) and the median step time over the timed steps.

The model is written from Loom's builder's definition (RMSNorm, RoPE with
rotate-half, causal grouped-query attention through
scaled_dot_product_attention, SwiGLU, cross-entropy over the logits), in
f32, parameters in Loom's initialisation's scale; the figures do not
depend on the values.

    python remat_torch.py --config '{"layers": 4, ...}' --budgets 1 0.5 0 [--rounds 5 --steps 3]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
import types

import torch
import torch.nn.functional as F


def make_params(cfg, generator):
    hd, p = cfg["dim"] // cfg["heads"], {}

    def w(*shape):
        return (torch.randn(*shape, generator=generator) * 0.02).requires_grad_()

    p["embed"] = w(cfg["vocab"], cfg["dim"])
    for i in range(cfg["layers"]):
        p[f"layers.{i}.attn_norm"] = torch.ones(cfg["dim"], requires_grad=True)
        p[f"layers.{i}.attn.wq"] = w(cfg["heads"] * hd, cfg["dim"])
        p[f"layers.{i}.attn.wk"] = w(cfg["kv_heads"] * hd, cfg["dim"])
        p[f"layers.{i}.attn.wv"] = w(cfg["kv_heads"] * hd, cfg["dim"])
        p[f"layers.{i}.attn.wo"] = w(cfg["dim"], cfg["heads"] * hd)
        p[f"layers.{i}.mlp_norm"] = torch.ones(cfg["dim"], requires_grad=True)
        p[f"layers.{i}.mlp.w_gate"] = w(cfg["ffn"], cfg["dim"])
        p[f"layers.{i}.mlp.w_up"] = w(cfg["ffn"], cfg["dim"])
        p[f"layers.{i}.mlp.w_down"] = w(cfg["dim"], cfg["ffn"])
    p["norm"] = torch.ones(cfg["dim"], requires_grad=True)
    p["output"] = w(cfg["vocab"], cfg["dim"])
    return p


def make_loss(cfg):
    hd, seq, batch = cfg["dim"] // cfg["heads"], cfg["seq"], cfg["batch"]
    inv = cfg.get("rope_theta", 10000.0) ** (-torch.arange(hd // 2, dtype=torch.float32) * 2.0 / hd)
    ang = torch.arange(seq, dtype=torch.float32)[:, None] * inv[None]
    cos, sin = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]
    group = cfg["heads"] // cfg["kv_heads"]

    def rms(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w

    def rope(x):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def loss(p, tokens, labels):
        x = p["embed"][tokens]
        for i in range(cfg["layers"]):
            q_ = lambda s: p[f"layers.{i}.{s}"]  # noqa: E731
            h = rms(x, q_("attn_norm"))
            q = rope((h @ q_("attn.wq").T).view(batch, seq, cfg["heads"], hd))
            k = rope((h @ q_("attn.wk").T).view(batch, seq, cfg["kv_heads"], hd))
            v = (h @ q_("attn.wv").T).view(batch, seq, cfg["kv_heads"], hd)
            k, v = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True)
            x = x + o.transpose(1, 2).reshape(batch, seq, cfg["dim"]) @ q_("attn.wo").T
            h = rms(x, q_("mlp_norm"))
            x = x + (F.silu(h @ q_("mlp.w_gate").T) * (h @ q_("mlp.w_up").T)) @ q_("mlp.w_down").T
        logits = (rms(x, p["norm"]) @ p["output"].T).reshape(batch * seq, cfg["vocab"])
        return F.cross_entropy(logits, labels.reshape(-1), ignore_index=-100)

    return loss


def compile_at(cfg, budget, first_step):
    """The loss compiled with the min-cut partitioner at `budget`: a code
    object of its own, so that Dynamo's cache (kept per code object) holds
    each budget's graph apart, compiled by `first_step` (its first call)
    under that budget."""
    import torch._functorch.config as functorch_config

    loss = make_loss(cfg)
    fn = types.FunctionType(loss.__code__.replace(), loss.__globals__, f"loss_{budget}",
                            loss.__defaults__, loss.__closure__)
    compiled = torch.compile(fn)
    with functorch_config.patch(activation_memory_budget=budget):
        first_step(compiled)
    return compiled


def run(cfg, budgets, rounds, steps):
    """Each budget's step compiled, then timed in turns (budgets in turn,
    `rounds` times, `steps` steps each): the ratio to budget 1.0 is taken
    within each round, so that a drift in the machine's speed cancels."""
    generator = torch.Generator().manual_seed(0)
    params = make_params(cfg, generator)
    tokens = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=generator)
    labels = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=generator)
    optimizer = torch.optim.AdamW(params.values(), lr=1e-3)
    param_ptrs = {p.untyped_storage().data_ptr() for p in params.values()}
    saved = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    def step(compiled):
        saved.clear()
        start = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = compiled(params, tokens, labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start, float(loss.detach())

    compiled, results = {}, {}
    for budget in budgets:
        began = time.perf_counter()
        compiled[budget] = compile_at(cfg, budget, step)
        # The parameters are saved too (the matmuls' operands): not
        # activations.
        results[budget] = {"budget": budget, "compile_s": time.perf_counter() - began,
                           "activation_bytes": sum(n for ptr, n in saved.items()
                                                   if ptr not in param_ptrs),
                           "ms": [], "ratios": []}
    for _ in range(rounds):
        medians = {}
        for budget in budgets:
            times = [step(compiled[budget])[0] for _ in range(steps)]
            medians[budget] = statistics.median(times) * 1e3
            results[budget]["ms"].append(medians[budget])
        for budget in budgets:
            results[budget]["ratios"].append(medians[budget] / medians[1.0])
    for result in results.values():
        ms, ratios = result.pop("ms"), result.pop("ratios")
        result.update(step_ms=statistics.median(ms), ratio=statistics.median(ratios),
                      ratio_min=min(ratios), ratio_max=max(ratios), torch=torch.__version__)
    return [results[budget] for budget in budgets]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the Llama's fields, JSON")
    parser.add_argument("--budgets", type=float, nargs="+", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="steps per budget per round")
    args = parser.parse_args()
    if 1.0 not in args.budgets:
        parser.error("--budgets needs 1.0, the reference")
    torch.set_num_threads(1)
    cfg = json.loads(args.config)
    for result in run(cfg, args.budgets, args.rounds, args.steps):
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
