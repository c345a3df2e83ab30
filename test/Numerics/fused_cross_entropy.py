# Tests train.linear_cross_entropy and its gradient, decomposed into token
# chunks and run by loom-run, against an unfused NumPy linear +
# cross-entropy and against PyTorch (F.linear + F.cross_entropy, autograd)
# in f64 (and f32): every reduction, ignore_index (with an all-ignored
# batch), label smoothing, z-loss, logit soft-capping, a bias, chunks that
# do and do not divide the tokens, and bf16 operands with f32 math.
# RUN: %python %s | FileCheck %s
# CHECK-NOT: FAIL
# CHECK: fused linear cross-entropy matches

import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from loom.opt import run_opt  # noqa: E402
from reference import Checks, elementwise_cast as cast, to_bf16  # noqa: E402
from loom.testing import run_function  # noqa: E402

rng = np.random.default_rng(7)
check = Checks()
IGNORE = -100


def reference(h, w, labels, reduction, smoothing, z_loss, softcap, bias=None):
    """Unfused: logits, then cross-entropy; loss, lse, dh, dw (and db with a
    bias) for a loss gradient of 1 (ones for reduction none), in f64."""
    h, w = h.astype(np.float64), w.astype(np.float64)
    z = h @ w.T
    if bias is not None:
        z = z + bias.astype(np.float64)
    t = np.tanh(z / softcap) if softcap > 0 else None
    logits = softcap * t if softcap > 0 else z
    m = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(-1)) + m[:, 0]
    valid = labels != IGNORE
    safe = np.where(valid, labels, 0)
    target = logits[np.arange(len(labels)), safe]
    per = (1 - smoothing) * (lse - target) + smoothing * (lse - logits.mean(-1)) + z_loss * lse**2
    per = np.where(valid, per, 0.0)
    count = max(valid.sum(), 1)
    loss = {"none": per, "sum": per.sum(), "mean": per.sum() / count}[reduction]
    scale = 1.0 / count if reduction == "mean" else 1.0
    p = np.exp(logits - lse[:, None])
    onehot = np.zeros_like(logits)
    onehot[np.arange(len(labels)), safe] = 1.0
    g = p * (1 + 2 * z_loss * lse[:, None]) - (1 - smoothing) * onehot - smoothing / logits.shape[1]
    g *= np.where(valid, scale, 0.0)[:, None]
    if softcap > 0:
        g *= 1 - t * t
    grads = [g @ w, g.T @ h] + ([g.sum(0)] if bias is not None else [])
    return [np.asarray(loss), lse, *grads]


def torch_reference(h, w, labels, reduction, smoothing, z_loss, softcap, bias=None):
    """PyTorch's unfused loss and its autograd gradients, in f64. z-loss and
    the soft-cap are not in F.cross_entropy: added as PaLM and Gemma 2 do."""
    th = torch.tensor(h, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    tb = None if bias is None else torch.tensor(bias, dtype=torch.float64, requires_grad=True)
    y = torch.tensor(labels, dtype=torch.int64)
    logits = F.linear(th, tw, tb)
    if softcap > 0:
        logits = softcap * torch.tanh(logits / softcap)
    loss = F.cross_entropy(logits, y, ignore_index=IGNORE, reduction=reduction,
                           label_smoothing=smoothing)
    if z_loss > 0:
        valid = (y != IGNORE).double()
        z = z_loss * torch.logsumexp(logits, -1) ** 2 * valid
        loss = loss + {"none": z, "sum": z.sum(), "mean": z.sum() / valid.sum().clamp(min=1)}[reduction]
    loss.backward(torch.ones_like(loss))
    grads = [th.grad.numpy(), tw.grad.numpy()] + ([tb.grad.numpy()] if tb is not None else [])
    return [loss.detach().numpy(), *grads]


def run(h, w, labels, reduction, smoothing, z_loss, softcap, chunk, elem, bias=None, chunk_vocab=0):
    """The fused op and its gradient through loom-run: loss, lse, dh, dw
    (and db with a bias)."""
    tokens, dim = h.shape
    vocab = w.shape[0]
    if bias is not None:
        return run_with_bias(h, w, bias, labels, reduction, smoothing, z_loss, softcap, chunk, elem,
                             chunk_vocab)
    ct = "f32" if elem == "bf16" else elem
    loss_t = f"tensor<{tokens}x{ct}>" if reduction == "none" else f"tensor<{ct}>"
    attrs = (f"ignore_index = {IGNORE} reduction = <{reduction}> label_smoothing = {smoothing} "
             f"z_loss = {z_loss} softcap = {softcap} chunk_tokens = {chunk}"
             + (f" chunk_vocab = {chunk_vocab}" if chunk_vocab else ""))
    ht, wt, lt = f"tensor<{tokens}x{dim}x{elem}>", f"tensor<{vocab}x{dim}x{elem}>", f"tensor<{tokens}xi32>"
    lse_t = f"tensor<{tokens}x{ct}>"
    # f32 in and out, truncated inside (as the fused loss's callers do).
    at = lambda t: t.replace("bf16", "f32")
    trunc = ""
    hv, wv = "%h", "%w"
    if elem == "bf16":
        trunc = (cast("%hb", "%h", (tokens, dim), "arith.truncf", "f32", "bf16") +
                 cast("%wb", "%w", (vocab, dim), "arith.truncf", "f32", "bf16"))
        hv, wv = "%hb", "%wb"
    ones = f"  %one = arith.constant dense<1.0> : {loss_t}\n"
    ext = ""
    dh, dw = "%dh", "%dw"
    if elem == "bf16":
        ext = (cast("%dhx", "%dh", (tokens, dim), "arith.extf", "bf16", "f32") +
               cast("%dwx", "%dw", (vocab, dim), "arith.extf", "bf16", "f32"))
        dh, dw = "%dhx", "%dwx"
    source = (
        f"func.func @f(%h: {at(ht)}, %w: {at(wt)}, %l: {lt}) -> ({loss_t}, {lse_t}, {at(ht)}, {at(wt)}) {{\n"
        + trunc + ones +
        f"  %loss, %lse = train.linear_cross_entropy {hv}, {wv}, %l {attrs}"
        f" : {ht}, {wt}, {lt} -> {loss_t}, {lse_t}\n"
        f"  %dh, %dw = train.linear_cross_entropy_grad {hv}, {wv}, %l, %lse, %one {attrs}"
        f" : {ht}, {wt}, {lt}, {lse_t}, {loss_t}\n"
        + ext +
        f"  return %loss, %lse, {dh}, {dw} : {loss_t}, {lse_t}, {at(ht)}, {at(wt)}\n}}\n")
    dtype = np.float64 if elem == "f64" else np.float32
    return run_function(source, "f", [h.astype(dtype), w.astype(dtype), labels])


def run_with_bias(h, w, bias, labels, reduction, smoothing, z_loss, softcap, chunk, elem, chunk_vocab):
    tokens, dim = h.shape
    vocab = w.shape[0]
    loss_t = f"tensor<{tokens}x{elem}>" if reduction == "none" else f"tensor<{elem}>"
    attrs = (f"ignore_index = {IGNORE} reduction = <{reduction}> label_smoothing = {smoothing} "
             f"z_loss = {z_loss} softcap = {softcap} chunk_tokens = {chunk}"
             + (f" chunk_vocab = {chunk_vocab}" if chunk_vocab else ""))
    ht, wt, bt = f"tensor<{tokens}x{dim}x{elem}>", f"tensor<{vocab}x{dim}x{elem}>", f"tensor<{vocab}x{elem}>"
    lt, lse_t = f"tensor<{tokens}xi32>", f"tensor<{tokens}x{elem}>"
    source = (
        f"func.func @f(%h: {ht}, %w: {wt}, %b: {bt}, %l: {lt}) -> ({loss_t}, {lse_t}, {ht}, {wt}, {bt}) {{\n"
        f"  %one = arith.constant dense<1.0> : {loss_t}\n"
        f"  %loss, %lse = train.linear_cross_entropy %h, %w bias %b, %l {attrs}"
        f" : {ht}, {wt}, {lt}, {bt} -> {loss_t}, {lse_t}\n"
        f"  %dh, %dw, %db = train.linear_cross_entropy_grad %h, %w bias %b, %l, %lse, %one {attrs}"
        f" : {ht}, {wt}, {lt}, {lse_t}, {loss_t}, {bt} -> {bt}\n"
        f"  return %loss, %lse, %dh, %dw, %db : {loss_t}, {lse_t}, {ht}, {wt}, {bt}\n}}\n")
    dtype = np.float64 if elem == "f64" else np.float32
    return run_function(source, "f", [h.astype(dtype), w.astype(dtype), bias.astype(dtype), labels])


tokens, dim, vocab = 24, 16, 40
cases = [
    # reduction, smoothing, z_loss, softcap, chunk, chunk_vocab (0: whole)
    ("mean", 0.0, 0.0, 0.0, 8, 0),
    ("sum", 0.0, 0.0, 0.0, 24, 0),
    ("none", 0.0, 0.0, 0.0, 5, 0),      # 5 does not divide 24: chunks of 4
    ("mean", 0.1, 0.0, 0.0, 8, 0),
    ("mean", 0.0, 1e-3, 0.0, 8, 0),
    ("mean", 0.0, 0.0, 3.0, 8, 0),
    ("sum", 0.1, 1e-3, 3.0, 6, 0),
    # Vocabulary blocks (an online log-sum-exp): 8 of 40, 16 -> 10 of 40.
    ("mean", 0.0, 0.0, 0.0, 8, 8),
    ("sum", 0.1, 1e-3, 3.0, 6, 16),
    ("none", 0.1, 0.0, 0.0, 5, 8),
]
for elem, rtol, atol in [("f64", 1e-10, 1e-12), ("f32", 2e-5, 2e-6)]:
    for reduction, smoothing, z_loss, softcap, chunk, chunk_vocab in cases:
        h = rng.standard_normal((tokens, dim))
        w = rng.standard_normal((vocab, dim)) * 0.5
        labels = rng.integers(0, vocab, tokens).astype(np.int32)
        labels[[3, 10]] = IGNORE
        want = reference(h, w, labels, reduction, smoothing, z_loss, softcap)
        got = run(h, w, labels, reduction, smoothing, z_loss, softcap, chunk, elem,
                  chunk_vocab=chunk_vocab)
        tag = (f"[{elem} {reduction} ls={smoothing} z={z_loss} cap={softcap} chunk={chunk}"
               f"{f' vocab block={chunk_vocab}' if chunk_vocab else ''}]")
        for name, g, r in zip(("loss", "lse", "dhidden", "dweight"), got, want):
            check(f"{name} {tag}", g, r, rtol, atol)
        for name, g, r in zip(("loss", "dhidden", "dweight"), [got[0], *got[2:]],
                              torch_reference(h, w, labels, reduction, smoothing, z_loss, softcap)):
            check(f"{name} vs PyTorch {tag}", g, r, rtol, atol)

# A bias: logits = h @ wᵀ + b, and its gradient (the logits' gradient
# summed over tokens).
for elem, rtol, atol in [("f64", 1e-10, 1e-12), ("f32", 2e-5, 2e-6)]:
    for reduction, smoothing, z_loss, softcap, chunk, chunk_vocab in [
            ("mean", 0.1, 1e-3, 3.0, 8, 0), ("none", 0.0, 0.0, 0.0, 6, 0), ("mean", 0.1, 0.0, 3.0, 8, 8)]:
        h = rng.standard_normal((tokens, dim))
        w = rng.standard_normal((vocab, dim)) * 0.5
        b = rng.standard_normal(vocab)
        labels = rng.integers(0, vocab, tokens).astype(np.int32)
        labels[5] = IGNORE
        got = run(h, w, labels, reduction, smoothing, z_loss, softcap, chunk, elem, bias=b,
                  chunk_vocab=chunk_vocab)
        want = reference(h, w, labels, reduction, smoothing, z_loss, softcap, bias=b)
        tag = (f"[{elem} bias {reduction} ls={smoothing} z={z_loss} cap={softcap} chunk={chunk}"
               f" vocab block={chunk_vocab}]")
        for name, g, r in zip(("loss", "lse", "dhidden", "dweight", "dbias"), got, want):
            check(f"{name} {tag}", g, r, rtol, atol)
        theirs = torch_reference(h, w, labels, reduction, smoothing, z_loss, softcap, bias=b)
        for name, g, r in zip(("loss", "dhidden", "dweight", "dbias"), [got[0], *got[2:]], theirs):
            check(f"{name} vs PyTorch {tag}", g, r, rtol, atol)

# The pass, end to end: a loss layer with a bias, differentiated unfused,
# fused before train-autodiff and fused after it (the training-step form),
# gives the same loss and gradients.
layer = f"""#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @layer(%h: tensor<{tokens}x{dim}xf64> {{train.param = "h"}}, %w: tensor<{vocab}x{dim}xf64> {{train.param = "w"}},
                 %b: tensor<{vocab}xf64> {{train.param = "b"}}, %y: tensor<{tokens}xi32> {{train.input = "labels"}})
    -> (tensor<f64> {{train.loss}}) {{
  %e = tensor.empty() : tensor<{tokens}x{vocab}xf64>
  %bb = linalg.broadcast ins(%b : tensor<{vocab}xf64>) outs(%e : tensor<{tokens}x{vocab}xf64>) dimensions = [0]
  %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%h, %w : tensor<{tokens}x{dim}xf64>, tensor<{vocab}x{dim}xf64>)
      outs(%bb : tensor<{tokens}x{vocab}xf64>) -> tensor<{tokens}x{vocab}xf64>
  %loss = train.cross_entropy %logits, %y ignore_index = {IGNORE} reduction = <mean> label_smoothing = 0.1 z_loss = 0.001
      : tensor<{tokens}x{vocab}xf64>, tensor<{tokens}xi32> -> tensor<f64>
  return %loss : tensor<f64>
}}
"""
fuse = "--train-fuse-linear-cross-entropy=chunk-tokens=8"
h, w, b = rng.standard_normal((tokens, dim)), rng.standard_normal((vocab, dim)) * 0.5, rng.standard_normal(vocab)
labels = rng.integers(0, vocab, tokens).astype(np.int32)
labels[2] = IGNORE
steps = {order: run_opt(layer, args) for order, args in (
    ("unfused", ["--train-autodiff"]), ("fused before autodiff", [fuse, "--train-autodiff"]),
    ("fused after autodiff", ["--train-autodiff", fuse]))}
for order in ("fused before autodiff", "fused after autodiff"):
    check.report("train.linear_cross_entropy_grad" in steps[order], f"{order}: the pass fused")
want = run_function(steps["unfused"], "layer", [h, w, b, labels])
for order in ("fused before autodiff", "fused after autodiff"):
    got = run_function(steps[order], "layer", [h, w, b, labels])
    for name, g, r in zip(("loss", "dhidden", "dweight", "dbias"), got, want):
        check(f"{name} [{order} vs unfused]", g, r, 1e-10, 1e-12)

# A bf16 model through the pass: the unfused loss computes in bf16, the
# fused one in f32 and rounds the loss to bf16 at the end. CCE's rule: the
# fused error against f64 (on the same bf16 operands) is no worse than the
# unfused bf16 error plus one bf16 rounding of the loss.
def bf16_layer(tokens, dim, vocab):
    return (f"func.func @layer(%h: tensor<{tokens}x{dim}xf32>, %w: tensor<{vocab}x{dim}xf32>, "
            f"%y: tensor<{tokens}xi32>) -> tensor<f32> {{\n"
            + cast("%hb", "%h", (tokens, dim), "arith.truncf", "f32", "bf16")
            + cast("%wb", "%w", (vocab, dim), "arith.truncf", "f32", "bf16") +
            f"  %zero = arith.constant 0.0 : bf16\n"
            f"  %e = tensor.empty() : tensor<{tokens}x{vocab}xbf16>\n"
            f"  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<{tokens}x{vocab}xbf16>) -> tensor<{tokens}x{vocab}xbf16>\n"
            f"  %logits = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, "
            f"affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] "
            f"ins(%hb, %wb : tensor<{tokens}x{dim}xbf16>, tensor<{vocab}x{dim}xbf16>) "
            f"outs(%z : tensor<{tokens}x{vocab}xbf16>) -> tensor<{tokens}x{vocab}xbf16>\n"
            f"  %loss = train.cross_entropy %logits, %y ignore_index = {IGNORE} reduction = <mean> "
            f"label_smoothing = 0.0 z_loss = 0.0 : tensor<{tokens}x{vocab}xbf16>, tensor<{tokens}xi32> -> tensor<bf16>\n"
            + cast("%l32", "%loss", (), "arith.extf", "bf16", "f32") +
            f"  return %l32 : tensor<f32>\n}}\n")


source = bf16_layer(tokens, dim, vocab)
fused_source = run_opt(source, [fuse])
check.report("train.linear_cross_entropy" in fused_source, "bf16: the pass fused")
h = to_bf16(rng.standard_normal((tokens, dim)).astype(np.float32))
w = to_bf16((rng.standard_normal((vocab, dim)) * 0.5).astype(np.float32))
labels = rng.integers(0, vocab, tokens).astype(np.int32)
ref = float(reference(h, w, labels, "mean", 0.0, 0.0, 0.0)[0])
(unfused_loss,) = run_function(source, "layer", [h, w, labels])
(fused_loss,) = run_function(fused_source, "layer", [h, w, labels])
unfused_err, fused_err = abs(float(unfused_loss) - ref), abs(float(fused_loss) - ref)
check.report(fused_err <= unfused_err + abs(ref) * 2.0**-8,
             f"bf16 through the pass: fused error {fused_err:.3g}, "
             f"unfused bf16 error {unfused_err:.3g} (f64 loss {ref:.6f})")

# Every label ignored: the mean is 0 (PyTorch gives NaN), gradients 0.
h, w = rng.standard_normal((tokens, dim)), rng.standard_normal((vocab, dim))
labels = np.full(tokens, IGNORE, np.int32)
got = run(h, w, labels, "mean", 0.0, 0.0, 0.0, 8, "f64")
check("loss [all ignored]", got[0], np.asarray(0.0), 0, 0)
check("dhidden [all ignored]", got[2], np.zeros((tokens, dim)), 0, 0)

# bf16 operands, f32 math: against the f64 reference on the bf16-rounded
# operands (CCE's rule: no worse than the low-precision reference, plus a
# small tolerance for the bf16 gradients' rounding).
h = to_bf16(rng.standard_normal((tokens, dim)).astype(np.float32))
w = to_bf16((rng.standard_normal((vocab, dim)) * 0.5).astype(np.float32))
labels = rng.integers(0, vocab, tokens).astype(np.int32)
want = reference(h, w, labels, "mean", 0.0, 0.0, 0.0)
got = run(h, w, labels, "mean", 0.0, 0.0, 0.0, 8, "bf16")
check("loss [bf16, f32 math]", got[0], want[0], 1e-5, 1e-6)
check("lse [bf16, f32 math]", got[1], want[1], 1e-5, 1e-5)
check("dhidden [bf16]", got[2], to_bf16(want[2].astype(np.float32)), 1e-2, 1e-4)
check("dweight [bf16]", got[3], to_bf16(want[3].astype(np.float32)), 1e-2, 1e-4)

if check.failures:
    print(f"{check.failures} FAILED")
    sys.exit(1)
print("fused linear cross-entropy matches")
