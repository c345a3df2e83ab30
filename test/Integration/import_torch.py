#!/usr/bin/env python3
"""The PyTorch importer (loom.frontend.torch) against PyTorch, run by ctest
under scripts/torch-python (torch 2.x and transformers from PyPI).

    import_torch.py gradients     each lowered op and pattern alone, then every
                                  model of torch_models, imported in f64:
                                  Loom's loss and each parameter's gradient
                                  (train-autodiff, run by loom-run) against
                                  PyTorch autograd within 1e-9 (1e-6 for the
                                  models whose RMSNorm computes in f32);
                                  import times
    import_torch.py train MODEL   the model compiled by loomc and trained on a
                                  uint16 token file from its own weights
                                  (--init): 50 steps on 1 rank and on 4 ranks
                                  of ZeRO-3 give PyTorch eager's losses
                                  (AdamW, same data order) within 1e-5; so do
                                  ZeRO-1/2 on 4 ranks, 2 microbatches, the
                                  fused loss, a remat budget, 2 and 4 pipeline
                                  stages (1F1B; ZB-H1 on 2) and 2 stages x 2
                                  ZeRO-2 replicas
                                  (tied embeddings on the first and the last)
    import_torch.py regression    the MLP regression compiled for ZeRO-1/2/3 on
                                  1 and 4 ranks, microbatches and 2 pipeline
                                  stages, trained on --input .npy files: 50
                                  losses within 1e-5 of PyTorch's
    import_torch.py weights       loom.compile(module, example_batch) run and its
                                  state_dict() loaded back into the module; tied
                                  models trained, exported to safetensors
                                  under the module's own names (tied ones
                                  restored): load_state_dict(strict=True)
                                  takes it and PyTorch's loss on the next
                                  batch is Loom's within 1e-6
    import_torch.py errors        what the importer refuses, each with the op,
                                  the FX node and the source line
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CORPUS, Check, mpi_env  # noqa: E402
import torch_models  # noqa: E402

import loom.frontend.torch as lt  # noqa: E402
from loom.checkpoint import export_safetensors  # noqa: E402
from loom.opt import find_tool, run_opt  # noqa: E402
from loom.testing import run_function  # noqa: E402

BATCH, SEQ, LR = 2, 16, 1e-3
MPI_ENV = mpi_env(120)
check = Check()


def rel(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300))


# --- gradients ----------------------------------------------------------------


class OpCase(torch.nn.Module):
    """``fn(self, ids)`` on parameters of the given shapes (f64), reduced to
    a scalar against fixed random weights so every output element counts."""

    def __init__(self, fn, out_shape, **shapes):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        for name, shape in shapes.items():
            self.register_parameter(name, torch.nn.Parameter(torch.randn(*shape, generator=g, dtype=torch.float64)))
        self.register_buffer("r", torch.randn(tuple(out_shape), generator=g, dtype=torch.float64), persistent=False)
        self.fn = fn

    def forward(self, ids, labels):
        out = self.fn(self, ids, labels)
        return out if out.dim() == 0 else (out * self.r).sum()


def _rope(x, theta=10000.0):
    s, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.cat([torch.outer(torch.arange(s, dtype=torch.float64), inv)] * 2, dim=-1)
    half = torch.cat([-x[..., d // 2:], x[..., :d // 2]], dim=-1)
    return x * angles.cos() + half * angles.sin()


def _repeat_kv(x, n):
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)


F = torch.nn.functional
B4 = (2, 4, 8, 8)  # batch, heads, seq, head_dim
# (label, fn(self, ids, labels), output shape, parameter shapes): each ATen
# op or pattern the importer lowers, alone.
OPS = [
    ("rms_norm (HF's written-out form)",
     lambda m, i, l: m.w * (m.x * torch.rsqrt(m.x.pow(2).mean(-1, keepdim=True) + 1e-6)), (3, 8), dict(x=(3, 8), w=(8,))),
    ("layer_norm", lambda m, i, l: F.layer_norm(m.x, (8,), m.w, m.b, 1e-5), (3, 8),
     dict(x=(3, 8), w=(8,), b=(8,))),
    ("rotate-half RoPE (slice, neg, cat, constant cos/sin)", lambda m, i, l: _rope(m.x), B4, dict(x=B4)),
    ("silu, gelu (erf and tanh), relu, sigmoid, tanh",
     lambda m, i, l: F.silu(m.x) + F.gelu(m.x) + F.gelu(m.x, approximate="tanh") + torch.relu(m.x) +
     torch.sigmoid(m.x) + torch.tanh(m.x), (4, 6), dict(x=(4, 6))),
    ("exp, log, sqrt, rsqrt, reciprocal, abs, pow 3 and 0.5, div, sub with alpha",
     lambda m, i, l: torch.exp(m.x) + torch.log(m.x.abs() + 1) + torch.sqrt(m.x * m.x + 1) +
     torch.rsqrt(m.x * m.x + 2) + 1 / (m.x * m.x + 1) + m.x.pow(3) + (m.x * m.x + 1).pow(0.5) +
     m.x / (m.y * m.y + 1) + torch.sub(m.x, m.y, alpha=0.5), (4, 6), dict(x=(4, 6), y=(4, 6))),
    ("where and comparisons (leaky ReLU)", lambda m, i, l: torch.where(m.x > 0, m.x, 0.1 * m.x), (4, 6),
     dict(x=(4, 6))),
    ("sum and mean over dims, keepdim, broadcasting",
     lambda m, i, l: m.x.sum(1, keepdim=True) * m.x.mean(0) + m.x.mean() - m.y, (4, 6), dict(x=(4, 6), y=(6,))),
    ("permute, transpose, reshape, expand, split, cat",
     lambda m, i, l: torch.cat(m.x.permute(2, 0, 1).reshape(6, 4, 1).expand(6, 4, 3).transpose(0, 1)
                               .split([2, 4], dim=1)[::-1], dim=1), (4, 6, 3), dict(x=(4, 2, 3))),
    ("linear with bias, x @ W.t(), addmm (Conv1D), bmm",
     lambda m, i, l: F.linear(m.x, m.w, m.b) + m.x @ m.w.t() + torch.addmm(m.b, m.x, m.v) +
     torch.bmm(m.x.view(1, 4, 6), m.v.view(1, 6, 5))[0], (4, 5), dict(x=(4, 6), w=(5, 6), b=(5,), v=(6, 5))),
    ("embedding (of the ids)", lambda m, i, l: F.embedding(i, m.w), (2, 8, 6), dict(w=(256, 6))),
    ("causal SDPA with repeat_kv (grouped query heads)",
     lambda m, i, l: F.scaled_dot_product_attention(m.q, _repeat_kv(m.k, 2), _repeat_kv(m.v, 2), is_causal=True),
     B4, dict(q=B4, k=(2, 2, 8, 8), v=(2, 2, 8, 8))),
    ("SDPA with a boolean causal mask and a scale",
     lambda m, i, l: F.scaled_dot_product_attention(m.q, m.k, m.v, attn_mask=torch.ones(8, 8, dtype=torch.bool)
                                                    .tril(), scale=0.3), B4, dict(q=B4, k=B4, v=B4)),
    ("SDPA without a mask (full attention)", lambda m, i, l: F.scaled_dot_product_attention(m.q, m.k, m.v), B4,
     dict(q=B4, k=B4, v=B4)),
    ("cross_entropy: label smoothing, ignore_index, sum",
     lambda m, i, l: F.cross_entropy(m.x, torch.where(torch.arange(16) % 5 == 0, -100, l.view(-1)), label_smoothing=0.1,
                                     reduction="sum"), (), dict(x=(16, 256))),
]


def gradients(work: str) -> None:
    ids, labels = torch_models.example("llama", 2, 8)
    for label, fn, out_shape, shapes in OPS:
        check_gradients(label, OpCase(fn, out_shape, **shapes), (ids, labels), 1e-9)
    patterns()
    promotion()
    large()
    for name in torch_models.LANGUAGE_MODELS + ("mlp",):
        model = torch_models.make(name)
        batch = torch_models.example(name, BATCH, SEQ)
        start = time.perf_counter()
        lt.import_module(model, batch)
        # A figure, not a check (bench/import_torch measures it).
        print(f"   {name}: imported in {time.perf_counter() - start:.2f} s")
        # Hugging Face's RMSNorm computes in f32 whatever the model's type
        # (hidden_states.to(torch.float32)): an f64 model keeps those f32
        # islands, in PyTorch and in Loom alike, and agrees to f32's rounding.
        bound = 1e-6 if name in ("llama", "mistral", "qwen3") else 1e-9
        check_gradients(name, model.double(), torch_models.example(name, BATCH, SEQ, torch.float64), bound)


def patterns() -> None:
    """RMSNorm and RoPE map onto train ops where they hold, with no
    transpose left; a scaled RoPE stays elementwise, says so, and computes
    the same loss."""
    want = {"llama": (5, 4), "mistral": (5, 4), "qwen3": (9, 4)}  # (rms_norm, rope) for 2 layers
    for name, (norms, ropes) in want.items():
        imported = lt.import_module(torch_models.make(name), torch_models.example(name, BATCH, SEQ))
        got = (imported.matched.get("rms_norm", 0), imported.matched.get("rope", 0))
        transposes = imported.text.count("linalg.transpose")
        check(got == (norms, ropes) and transposes == 0 and not imported.remarks,
              f"{name}: {got[0]} RMSNorms as train.rms_norm, {got[1]} RoPEs as train.rope (want {norms}, {ropes}), "
              f"{transposes} transposes")
    import transformers as T
    torch.manual_seed(0)
    scaled = lt.causal_lm_loss(T.LlamaForCausalLM(T.LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8})))
    batch = torch_models.example("llama", BATCH, SEQ)
    imported = lt.import_module(scaled, batch)
    params = imported.state_dict(scaled)
    args = [params[n].numpy() for n, _ in imported.parameters] + [t.numpy().astype(np.int32) for t in batch]
    loss, want_loss = float(run_function(imported.text, "forward", args)[0]), scaled(*batch).item()
    check("rope" not in imported.matched and any("not train.rope's" in r for r in imported.remarks) and
          abs(loss - want_loss) <= 1e-6 * want_loss,
          f"Llama 3 scaled RoPE kept elementwise ({imported.remarks[0] if imported.remarks else 'no remark'}); "
          f"loss {loss:.7f} vs PyTorch {want_loss:.7f}")


class Threshold(torch.nn.Module):
    """Integer ids compared with a python float: torch compares in float."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(1.0, 9.0))

    def forward(self, ids, y):
        return (torch.where(ids >= 2.5, self.w, 2 * self.w) * y).sum()


def promotion() -> None:
    model, ids, y = Threshold(), torch.arange(8), torch.ones(8)
    imported = lt.import_module(model, (ids, y))
    got = float(run_function(imported.text, "forward", [model.w.detach().numpy(), ids.numpy().astype(np.int32),
                                                         y.numpy()])[0])
    check(got == model(ids, y).item(), f"ids >= 2.5 compares in float: {got} vs PyTorch {model(ids, y).item()}")


def large() -> None:
    """Llama-3-8B's shape built under empty_weights (no parameter memory)
    imports: every parameter at its shape, every RMSNorm and RoPE mapped,
    and the buffers the meta export borrowed are back, real."""
    import transformers as T
    config = T.LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                           num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                           rope_theta=500000.0)
    with lt.empty_weights():
        model = lt.causal_lm_loss(T.LlamaForCausalLM(config))
    inv_freq = model.model.model.rotary_emb.inv_freq.clone()
    start = time.perf_counter()
    imported = lt.import_module(model, (torch.zeros(1, 2048, dtype=torch.long),) * 2)
    seconds = time.perf_counter() - start
    step = run_opt(imported.text, ["--train-autodiff"])
    buffer = model.model.model.rotary_emb.inv_freq
    # Such a module has no weights to start a trainer from: writing them is
    # an error, and loom.compile of a trainer says the trainer initialises.
    try:
        imported.write_init(model, os.path.join(tempfile.mkdtemp(), "init"))
        check(False, "write_init of an empty_weights module: no error")
    except ValueError as error:
        check("hold no values" in str(error), f"write_init of an empty_weights module: {error}")
    count = sum(math.prod(shape) for _, shape in imported.parameters)
    check(len(imported.parameters) == 291 and count == 8_030_261_248 and
          imported.matched == {"rms_norm": 65, "rope": 64} and step.count("train.grad") == 291 and
          buffer.device.type == "cpu" and torch.equal(buffer, inv_freq),
          f"Llama-3-8B shape under empty_weights: {len(imported.parameters)} parameters ({count:,}), "
          f"{imported.matched}, differentiated; buffers restored; imported in {seconds:.1f} s")


def check_gradients(label: str, model: torch.nn.Module, batch, bound: float) -> None:
    """Loom's f64 loss and gradients (train-autodiff, run by loom-run)
    against PyTorch autograd."""
    imported = lt.import_module(model, batch)
    step = run_opt(imported.text, ["--train-autodiff"])
    params = imported.state_dict(model)
    args = [params[n].numpy() for n, _ in imported.parameters]
    args += [t.numpy().astype(np.int32) if not t.is_floating_point() else t.numpy() for t in batch]
    results = run_function(step, "forward", args)
    loss = model(*batch)
    model.zero_grad()
    loss.backward()
    own = dict(model.named_parameters())
    worst = max(rel(g, own[imported.prefix + n].grad.numpy()) for (n, _), g in zip(imported.parameters, results[1:]))
    loss_error = rel(results[0], loss.item())
    check(loss_error <= bound and worst <= bound,
          f"{label}: f64 loss within {loss_error:.1e} and {len(imported.parameters)} gradients within "
          f"{worst:.1e} of PyTorch autograd (bound {bound:g})")


# --- training ---------------------------------------------------------------------


def token_file(work: str) -> str:
    """The corpus's bytes as uint16 token ids (nanoGPT's train.bin form)."""
    path = os.path.join(work, "tokens.u16")
    if not os.path.exists(path):
        np.frombuffer(open(CORPUS, "rb").read(), np.uint8).astype("<u2").tofile(path)
    return path


def batch_at(tokens: np.ndarray, step: int, global_batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens and labels the trainer reads at `step`, over every rank:
    sequence g of the step starts at g * seq mod the number of windows."""
    windows = len(tokens) - SEQ - 1
    starts = [((step * global_batch + g) * SEQ) % windows for g in range(global_batch)]
    x = torch.tensor(np.stack([tokens[s:s + SEQ] for s in starts]))
    y = torch.tensor(np.stack([tokens[s + 1:s + SEQ + 1] for s in starts]))
    return x, y


def reference_losses(name: str, tokens: np.ndarray, global_batch: int, steps: int) -> list[float]:
    """PyTorch eager from the same weights: AdamW as the trainer's, the
    trainer's data order (batch_at)."""
    model = torch_models.make(name)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    out = []
    for step in range(steps):
        loss = model(*batch_at(tokens, step, global_batch))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        out.append(loss.item())
    return out


def compile_trainer(work: str, forward: str, exe: str, flags) -> subprocess.CompletedProcess:
    return subprocess.run([find_tool("loomc"), forward, "--lr", str(LR), "-O1", "-o", exe, *flags],
                          capture_output=True, text=True)


def run_trainer(exe: str, ranks: int, data: str, init: str, steps: int, log: str, *extra) -> list[float]:
    if os.path.exists(log):
        os.remove(log)
    cmd = [exe, "--data", data, "--data-format", "uint16", "--init", init, "--steps", str(steps),
           "--log", log, *extra]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), *cmd]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, **MPI_ENV})
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{' '.join(cmd)} timed out after 900 s (a hang guard)")
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f]


def remat_floor(work: str, forward: str) -> float:
    """The smallest plan loomc reaches, from its error for a budget below it."""
    proc = compile_trainer(work, forward, os.path.join(work, "unused"), ["--remat-budget-mb=0.001"])
    found = re.search(r"smallest memory plan Loom reaches is ([0-9.]+) MiB", proc.stderr)
    if proc.returncode == 0 or not found:
        raise SystemExit(f"loomc --remat-budget-mb=0.001 did not name the floor:\n{proc.stderr}")
    return float(found.group(1))


def train(work: str, name: str) -> None:
    work = os.path.join(work, name)
    os.makedirs(work, exist_ok=True)
    model = torch_models.make(name)
    imported = lt.import_module(model, torch_models.example(name, BATCH, SEQ))
    forward = os.path.join(work, "forward.mlir")
    with open(forward, "w") as f:
        f.write(imported.text)
    init = os.path.join(work, "init")
    shutil.rmtree(init, ignore_errors=True)
    imported.write_init(model, init)
    data = token_file(work)
    tokens = np.fromfile(data, "<u2").astype(np.int64)
    floor = remat_floor(work, forward)
    configs = [("1 rank", 1, 1, 50, []), ("ZeRO-3 on 4 ranks", 4, 4, 50, ["--zero-stage=3"]),
               ("ZeRO-1 on 4 ranks", 4, 4, 20, ["--zero-stage=1"]),
               ("ZeRO-2 on 4 ranks", 4, 4, 20, ["--zero-stage=2"]),
               ("2 microbatches", 1, 1, 20, ["--microbatches=2"]),
               ("the fused loss", 1, 1, 20, [f"--fuse-cross-entropy={SEQ}"]),
               (f"--remat-budget-mb={floor}", 1, 1, 20, [f"--remat-budget-mb={floor}"]),
               ("2 pipeline stages", 2, 1, 20, ["--pipeline-stages=2", "--microbatches=2"]),
               ("4 pipeline stages", 4, 1, 20, ["--pipeline-stages=4", "--microbatches=2"]),
               ("2 stages, ZB-H1", 2, 1, 20, ["--pipeline-stages=2", "--microbatches=2",
                                              "--pipeline-schedule=zb-h1"]),
               ("2 stages x 2 ZeRO-2 replicas", 4, 2, 20,
                ["--pipeline-stages=2", "--microbatches=2", "--zero-stage=2"])]
    references: dict[tuple[int, int], list[float]] = {}
    for label, ranks, data_ranks, steps, flags in configs:
        exe = os.path.join(work, "trainer-" + re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-"))
        built = compile_trainer(work, forward, exe, ["--world-size", str(ranks), *flags])
        if built.returncode:
            check(False, f"{name}: loomc for {label}:\n{built.stderr}")
            continue
        got = run_trainer(exe, ranks, data, init, steps, os.path.join(work, exe + ".jsonl"))
        key = (BATCH * data_ranks, steps)
        if key not in references:
            references[key] = reference_losses(name, tokens, *key)
        want = references[key]
        worst = max(abs(g - w) / abs(w) for g, w in zip(got, want))
        check(len(got) == steps and worst <= 1e-5,
              f"{name}, {label}: {steps} losses within {worst:.1e} of PyTorch eager (bound 1e-5; "
              f"last {got[-1]:.6f} vs {want[-1]:.6f})")


# --- weights out ---------------------------------------------------------------------


def weights(work: str) -> None:
    from safetensors.torch import load_file
    api(work)
    for name in sorted(torch_models.TIED):
        directory = os.path.join(work, "weights-" + name)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        model = torch_models.make(name)
        imported = lt.import_module(model, torch_models.example(name, BATCH, SEQ))
        check(bool(imported.tied), f"{name}: tied {imported.tied}")
        forward = os.path.join(directory, "forward.mlir")
        with open(forward, "w") as f:
            f.write(imported.text)
        init = os.path.join(directory, "init")
        imported.write_init(model, init)
        exe = os.path.join(directory, "trainer")
        built = compile_trainer(directory, forward, exe, ["--world-size", "2", "--zero-stage=3"])
        if built.returncode:
            check(False, f"{name}: loomc:\n{built.stderr}")
            continue
        data = token_file(directory)
        ckpt = os.path.join(directory, "ckpt")
        got = run_trainer(exe, 2, data, init, 6, os.path.join(directory, "log.jsonl"), "--checkpoint", ckpt,
                          "--checkpoint-every", "5")
        exported = os.path.join(directory, "model.safetensors")
        export_safetensors(os.path.join(ckpt, "step-5"), exported, tied=imported.tied)
        fresh = torch_models.make(name, seed=123)
        state = {imported.prefix + k: v for k, v in load_file(exported).items()}
        missing = fresh.load_state_dict(state, strict=True)
        x, y = batch_at(np.fromfile(data, "<u2").astype(np.int64), 5, 2 * BATCH)
        with torch.no_grad():
            loss = fresh(x, y).item()
        error = abs(loss - got[5]) / abs(got[5])
        check(not missing.missing_keys and error <= 1e-6,
              f"{name}: the exported safetensors ({len(state)} tensors, tied restored) load strictly; "
              f"PyTorch's loss {loss:.7f} vs Loom's step 5 {got[5]:.7f} ({error:.1e}, bound 1e-6)")


def api(work: str) -> None:
    """loom.compile(module, example_batch, ...) in-process, run, and
    state_dict() back into the module."""
    import loom
    name = "qwen3"
    directory = os.path.join(work, "api")
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    model = torch_models.make(name)
    # One tensor for both inputs, as a shape-only example often is: each
    # must still be its own argument.
    shape_only = (torch.zeros(BATCH, SEQ, dtype=torch.long),) * 2
    trainer = loom.compile(model, shape_only, output=os.path.join(directory, "trainer"),
                           world_size=2, zero_stage=3, lr=LR)
    data = token_file(directory)
    rows = trainer.run(data, steps=6, ranks=2, checkpoint=os.path.join(directory, "ckpt"),
                       args=["--data-format", "uint16", "--checkpoint-every", "5"], env=MPI_ENV, timeout_s=900)
    tokens = np.fromfile(data, "<u2").astype(np.int64)
    want = reference_losses(name, tokens, 2 * BATCH, 6)
    worst = max(abs(r["loss"] - w) / abs(w) for r, w in zip(rows, want))
    check(worst <= 1e-5, f"loom.compile({name} module, example batch, world_size=2, zero_stage=3).run(): 6 losses "
                         f"within {worst:.1e} of PyTorch eager")
    hf = torch_models.make(name, seed=99).model
    state = trainer.state_dict(os.path.join(directory, "ckpt", "step-5"))
    result = hf.load_state_dict(state, strict=True)
    x, y = batch_at(tokens, 5, 2 * BATCH)
    with torch.no_grad():
        loss = lt.causal_lm_loss(hf)(x, y).item()
    error = abs(loss - rows[5]["loss"]) / rows[5]["loss"]
    check(not result.missing_keys and error <= 1e-6,
          f"trainer.state_dict() ({len(state)} tensors) loads strictly into the HF model: loss {loss:.7f} vs "
          f"Loom's step 5 {rows[5]['loss']:.7f} ({error:.1e})")
    # A module without weights (empty_weights) compiles; the trainer then
    # starts from its own initialisation, and loom.compile says so.
    import warnings
    with lt.empty_weights():
        empty = torch_models.make("llama")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = loom.compile(empty, shape_only, output=os.path.join(directory, "empty-trainer"), lr=LR)
    said = [str(w.message) for w in caught if "hold no values" in str(w.message)]
    check(compiled.path and compiled.init is None and len(said) == 1,
          f"loom.compile of an empty_weights module: a trainer, no init, and the warning: {said[:1]}")


# --- refusals --------------------------------------------------------------------------


class ReturnsLogits(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, y):
        return self.lin(x)


class Padded(torch.nn.Module):
    """Attention with a padding mask computed from the tokens."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(torch_models.VOCAB, 16)

    def forward(self, tokens, labels):
        x = self.emb(tokens).view(tokens.shape[0], tokens.shape[1], 2, 8).transpose(1, 2)
        mask = (tokens != 0)[:, None, None, :]
        a = torch.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=mask)
        return a.float().sum()


def regression(work: str) -> None:
    """The MLP regression compiles with ZeRO-1/2/3 on 1 and 4 ranks, under a
    remat budget, with microbatches (its mean squared error summed over
    them) and on 2 pipeline stages, and trains on --input x=FILE.npy
    y=FILE.npy to PyTorch eager's losses over 50 steps on 1 rank, on 4
    ranks of ZeRO-3, in 2 microbatches and on the stages; without --input
    the trainer names what it cannot fill."""
    batch, samples = 8, 1000
    model = torch_models.make("mlp")
    imported = lt.import_module(model, torch_models.example("mlp", batch, 16))
    forward = os.path.join(work, "mlp.mlir")
    with open(forward, "w") as f:
        f.write(imported.text)
    init = os.path.join(work, "mlp-init")
    shutil.rmtree(init, ignore_errors=True)
    imported.write_init(model, init)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(samples, 16, generator=g)
    y = (x[:, :4].sum(1) - x[:, 4:8].prod(1)).float()
    files = {}
    for name, value in (("x", x), ("y", y)):
        files[name] = os.path.join(work, f"mlp-{name}.npy")
        np.save(files[name], value.numpy())
    inputs = ["--input", f"x={files['x']}", "--input", f"y={files['y']}"]
    built = {}
    for ranks in (1, 4):
        for stage in (1, 2, 3):
            exe = os.path.join(work, f"mlp-r{ranks}-z{stage}")
            proc = compile_trainer(work, forward, exe, ["--world-size", str(ranks), "--zero-stage", str(stage)])
            built[(ranks, stage)] = proc.returncode == 0
            if proc.returncode:
                print(proc.stderr)
    check(all(built.values()), f"MLP regression: {sum(built.values())}/6 trainers built (ZeRO-1/2/3, 1 and 4 ranks)")
    floor = remat_floor(work, forward)
    proc = compile_trainer(work, forward, os.path.join(work, "mlp-remat"), [f"--remat-budget-mb={floor}"])
    check(proc.returncode == 0, f"MLP regression: --remat-budget-mb={floor} (the floor) built"
                                + (f": {proc.stderr[-300:]}" if proc.returncode else ""))
    staged = os.path.join(work, "mlp-pp2")
    proc = compile_trainer(work, forward, staged, ["--world-size", "2", "--pipeline-stages", "2"])
    check(proc.returncode == 0, "MLP regression: 2 pipeline stages built" +
          (f": {proc.stderr[-300:]}" if proc.returncode else ""))
    for name, flags in (("mlp-mb2", ["--microbatches", "2"]),
                        ("mlp-pp2-mb2", ["--world-size", "2", "--pipeline-stages", "2", "--microbatches", "2"])):
        proc = compile_trainer(work, forward, os.path.join(work, name), flags)
        check(proc.returncode == 0, f"MLP regression: {' '.join(flags)} built" +
              (f": {proc.stderr[-300:]}" if proc.returncode else ""))
    for label, ranks, exe in (("1 rank", 1, "mlp-r1-z1"), ("ZeRO-3 on 4 ranks", 4, "mlp-r4-z3"),
                              ("2 pipeline stages", 2, "mlp-pp2"), ("2 microbatches", 1, "mlp-mb2"),
                              ("2 stages x 2 microbatches", 2, "mlp-pp2-mb2")):
        exe, log = os.path.join(work, exe), os.path.join(work, exe + ".jsonl")
        data_ranks = 1 if "stages" in label else ranks
        cmd = [exe, "--init", init, "--steps", "50", "--log", log, *inputs]
        if ranks > 1:
            cmd = ["mpirun", "-np", str(ranks), *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, **MPI_ENV})
        if proc.returncode:
            check(False, f"MLP regression, {label}: {proc.stdout[-400:]}{proc.stderr[-400:]}")
            continue
        got = [json.loads(line)["loss"] for line in open(log)]
        reference = torch_models.make("mlp")
        optimizer = torch.optim.AdamW(reference.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        want = []
        for step in range(50):
            rows = [(step * data_ranks * batch + k) % samples for k in range(data_ranks * batch)]
            loss = reference(x[rows], y[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            want.append(loss.item())
        worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        check(len(got) == 50 and worst <= 1e-5,
              f"MLP regression, {label}: 50 losses within {worst:.1e} of "
              f"PyTorch eager (bound 1e-5; last {got[-1]:.6f} vs {want[-1]:.6f})")
    proc = subprocess.run([os.path.join(work, "mlp-r1-z1"), "--steps", "1", "--input", f"x={files['x']}"],
                          capture_output=True, text=True, timeout=900, env={**os.environ, **MPI_ENV})
    said = next((line for line in (proc.stdout + proc.stderr).splitlines() if "cannot fill" in line), "")
    check(proc.returncode != 0 and "input 'y' the trainer cannot fill" in said and "--input y=FILE.npy" in said,
          f"MLP regression without --input y: {said.strip()}")


def errors(work: str) -> None:
    import transformers as T
    this = os.path.basename(__file__)
    cases = []
    eager = torch_models.hf("llama")
    eager.config._attn_implementation = "eager"
    cases.append(("eager attention", lt.causal_lm_loss(eager), "aten._softmax.default",
                  "attn_implementation='sdpa'", "modeling_llama.py"))
    torch.manual_seed(0)
    dropout = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=256, n_embd=32, n_layer=1, n_head=2, n_positions=32))
    cases.append(("GPT-2 with dropout 0.1", lt.causal_lm_loss(dropout), "aten.native_dropout.default",
                  "p=0.1 in training mode", "modeling_gpt2.py"))
    cases.append(("a padding mask", Padded(), "aten.scaled_dot_product_attention.default",
                  "computed from the inputs", this))
    cases.append(("logits as the result", ReturnsLogits(), "aten.linear.default", "it must be the scalar f32 loss",
                  this))
    for label, module, op, reason, source in cases:
        batch = (torch.randn(2, 8), torch.randn(2)) if isinstance(module, ReturnsLogits) else \
            torch_models.example("llama", BATCH, SEQ)
        try:
            lt.import_module(module, batch)
            check(False, f"{label}: imported, not refused")
        except lt.UnsupportedError as error:
            message = str(error)
            check(op in message and reason in message and "FX node" in message and source in message,
                  f"{label}: {message}")
    bf16 = torch_models.hf("llama").to(torch.bfloat16)
    try:
        lt.import_module(lt.causal_lm_loss(bf16), torch_models.example("llama", BATCH, SEQ))
        check(False, "bf16 parameters: imported, not refused")
    except lt.UnsupportedError as error:
        check("bf16" in str(error) and "f32" in str(error), f"bf16 parameters: {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("group", choices=["gradients", "train", "regression", "weights", "errors"])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--dir", default=os.path.join("build", "test", "import-torch"))
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    if args.group == "train":
        if args.model not in torch_models.LANGUAGE_MODELS:
            parser.error(f"train takes one of {', '.join(torch_models.LANGUAGE_MODELS)}")
        train(args.dir, args.model)
    else:
        {"gradients": gradients, "regression": regression, "weights": weights,
         "errors": errors}[args.group](args.dir)
    if check.failures:
        sys.exit(f"{check.failures} check(s) failed")


if __name__ == "__main__":
    main()
