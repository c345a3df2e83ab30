"""NumPy references for the train ops, written from their definitions.

Shared by the numerical tests; kept independent of Loom's decompositions so
the two can check each other. Also what the bf16 tests share: bf16 rounding
in NumPy, and the IR of an elementwise cast (loom-run's arrays are f32, so
a bf16 function casts inside).
"""

import numpy as np


def to_bf16(x):
    """Rounds to the nearest bf16 (ties to even), kept as f32."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def elementwise_cast(name, src, shape, op, a, b):
    """MLIR text: `name` = `op` (arith.truncf or arith.extf) of the tensor
    `src` of `shape` from element type `a` to `b`, as a linalg.generic
    (tensor-level arith casts do not bufferise)."""
    dims = ", ".join(f"d{i}" for i in range(len(shape)))
    m = f"affine_map<({dims}) -> ({dims})>"
    t = "".join(f"{d}x" for d in shape)
    par = ", ".join(['"parallel"'] * len(shape))
    return (f"  {name}_e = tensor.empty() : tensor<{t}{b}>\n"
            f"  {name} = linalg.generic {{indexing_maps = [{m}, {m}], iterator_types = [{par}]}} "
            f"ins({src} : tensor<{t}{a}>) outs({name}_e : tensor<{t}{b}>) {{\n"
            f"  ^bb0(%in: {a}, %o: {b}):\n    %c = {op} %in : {a} to {b}\n"
            f"    linalg.yield %c : {b}\n  }} -> tensor<{t}{b}>\n")


class Checks:
    """Numerical checks that print `ok NAME: ...` or `FAIL NAME: ...` and
    count the failures (the tests' FileCheck lines look for FAIL)."""

    def __init__(self):
        self.failures = 0

    def report(self, ok, message):
        print(f"{'ok' if ok else 'FAIL'} {message}")
        self.failures += not ok

    def __call__(self, name, got, want, rtol, atol):
        """`got` against `want` with np.allclose, and the largest error."""
        same_shape = got.shape == np.shape(want)
        ok = same_shape and np.allclose(got, want, rtol=rtol, atol=atol)
        err = float(np.max(np.abs(got - want))) if same_shape else float("inf")
        self.report(ok, f"{name}: max abs error {err:.3g}")


def embedding(table, ids):
    return table[ids]


def embedding_grad(grad, ids, rows):
    out = np.zeros((rows, grad.shape[-1]), grad.dtype)
    np.add.at(out, ids.reshape(-1), grad.reshape(-1, grad.shape[-1]))
    return out


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope(x, theta, inverse=False):
    """Rotate-half RoPE; `inverse` turns by the negative angle."""
    seq, head_dim = x.shape[1], x.shape[3]
    half = head_dim // 2
    inv_freq = theta ** (-np.arange(half, dtype=np.float64) * 2.0 / head_dim)
    angle = np.arange(seq, dtype=np.float64)[:, None] * inv_freq[None]
    cos = np.cos(angle)[None, :, None, :].astype(x.dtype)
    sin = np.sin(-angle if inverse else angle)[None, :, None, :].astype(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def attention_probs(q, k, causal, scale):
    group = q.shape[2] // k.shape[2]
    kk = np.repeat(k, group, axis=2)
    scores = np.einsum("bshd,bthd->bhst", q, kk) * scale
    if causal:
        mask = np.tril(np.ones((q.shape[1], k.shape[1]), bool))
        scores = np.where(mask, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def attention(q, k, v, causal, scale):
    group = q.shape[2] // k.shape[2]
    p = attention_probs(q, k, causal, scale)
    return np.einsum("bhst,bthd->bshd", p, np.repeat(v, group, axis=2))


def attention_grad(q, k, v, dout, causal, scale):
    group = q.shape[2] // k.shape[2]
    kk, vv = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    p = attention_probs(q, k, causal, scale)
    dv = np.einsum("bhst,bshd->bthd", p, dout)
    dp = np.einsum("bshd,bthd->bhst", dout, vv)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = np.einsum("bhst,bthd->bshd", ds, kk) * scale
    dk = np.einsum("bhst,bshd->bthd", ds, q) * scale
    fold = lambda t: t.reshape(t.shape[0], t.shape[1], k.shape[2], group, t.shape[3]).sum(3)
    return dq, fold(dk), fold(dv)


def cross_entropy(logits, labels, ignore_index, reduction, smoothing, z_loss):
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    valid = labels != ignore_index
    target = logits[np.arange(len(labels)), np.where(valid, labels, 0)]
    loss = (1 - smoothing) * (lse - target) + smoothing * (lse - logits.mean(-1)) + z_loss * lse**2
    loss = np.where(valid, loss, 0).astype(logits.dtype)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.array(loss.sum(), logits.dtype)
    return np.array(loss.sum() / max(valid.sum(), 1), logits.dtype)
