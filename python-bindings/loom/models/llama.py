"""A Llama-style decoder as Loom forward IR.

Emits one ``func.func @forward`` whose arguments are the parameters (tagged
``train.param = "<name>"``) and the token and label inputs (``train.input``),
and whose result is the mean cross-entropy loss (``train.loss``). The body is
linalg/tensor/arith/math on tensors plus ``train`` ops (embedding, RMSNorm,
rotary embedding, causal grouped-query attention, cross-entropy). Nothing is
materialised, so the 70B config is emitted in milliseconds.

Weights are stored ``[out_features, in_features]``, as ``torch.nn.Linear``
does, and applied as ``x @ W^T``.

    python3 -m loom.models.llama --config tiny -o forward.mlir
    python3 -m loom.models.llama --config llama3-8b --seq 4096 | loom-opt --train-autodiff
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from typing import Iterator


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    layers: int
    dim: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int
    batch: int
    dtype: str = "f32"
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    ignore_index: int = -100
    label_smoothing: float = 0.0
    z_loss: float = 0.0

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def validate(self) -> None:
        """Raises ValueError naming the first inconsistent field."""
        for name in ("layers", "dim", "heads", "kv_heads", "ffn", "vocab", "seq", "batch"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be a multiple of heads ({self.heads})")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim % 2:
            raise ValueError(f"head_dim ({self.head_dim}) must be even for rotary embedding")
        if self.dtype not in ("f32", "bf16", "f64"):
            raise ValueError(f"dtype must be f32, bf16 or f64, got {self.dtype}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.z_loss < 0.0:
            raise ValueError(f"z_loss must be non-negative, got {self.z_loss}")

    def parameters(self) -> list[tuple[str, tuple[int, ...]]]:
        """Parameter names and shapes, in argument order."""
        kv = self.kv_heads * self.head_dim
        params: list[tuple[str, tuple[int, ...]]] = [("embed", (self.vocab, self.dim))]
        for i in range(self.layers):
            p = f"layers.{i}"
            params += [
                (f"{p}.attn_norm", (self.dim,)),
                (f"{p}.attn.wq", (self.dim, self.dim)),
                (f"{p}.attn.wk", (kv, self.dim)),
                (f"{p}.attn.wv", (kv, self.dim)),
                (f"{p}.attn.wo", (self.dim, self.dim)),
                (f"{p}.mlp_norm", (self.dim,)),
                (f"{p}.mlp.w_gate", (self.ffn, self.dim)),
                (f"{p}.mlp.w_up", (self.ffn, self.dim)),
                (f"{p}.mlp.w_down", (self.dim, self.ffn)),
            ]
        params += [("norm", (self.dim,)), ("output", (self.vocab, self.dim))]
        return params

    def num_parameters(self) -> int:
        return sum(math.prod(shape) for _, shape in self.parameters())


CONFIGS: dict[str, LlamaConfig] = {
    "tiny": LlamaConfig(layers=2, dim=64, heads=4, kv_heads=2, ffn=128, vocab=256, seq=32, batch=4),
    # About 96M parameters.
    "small": LlamaConfig(layers=12, dim=640, heads=10, kv_heads=5, ffn=1728, vocab=32000, seq=1024, batch=8),
    "llama3-8b": LlamaConfig(layers=32, dim=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256,
                             seq=2048, batch=1, dtype="bf16", rope_theta=500000.0),
    "llama3-70b": LlamaConfig(layers=80, dim=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256,
                              seq=2048, batch=1, dtype="bf16", rope_theta=500000.0),
}

# The GPU benchmarks' shapes (bench/gpu_train, gpu_kernels, gpu_attention):
# Llama-style models of about 125M and 1B parameters at seq 2048, and "tiny"
# to check the scripts on the CPU.
GPU_BENCH_SHAPES: dict[str, LlamaConfig] = {
    "tiny": CONFIGS["tiny"],
    "125m": LlamaConfig(layers=12, dim=768, heads=12, kv_heads=4, ffn=2048, vocab=32000,
                        seq=2048, batch=4),
    "1b": LlamaConfig(layers=16, dim=2048, heads=16, kv_heads=8, ffn=5632, vocab=32000,
                      seq=2048, batch=1),
}


def _f(value: float) -> str:
    """A float literal MLIR accepts (it needs a dot before an exponent)."""
    text = repr(float(value))
    if "e" in text and "." not in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def _t(shape: tuple[int, ...], elem: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


class _Emitter:
    """Writes SSA lines with fresh names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"%{hint}{self.counter}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)


_MATMUL_T = ("indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, "
             "affine_map<(m, n, k) -> (m, n)>]")
_ID2 = "affine_map<(i, j) -> (i, j)>"
_ID3 = "affine_map<(i, j, k) -> (i, j, k)>"


def build_forward(cfg: LlamaConfig) -> str:
    """Returns the forward IR of ``cfg`` as MLIR text."""
    cfg.validate()
    e = _Emitter()
    dt, acc = cfg.dtype, ("f32" if cfg.dtype == "bf16" else cfg.dtype)
    n, d, hd = cfg.batch * cfg.seq, cfg.dim, cfg.head_dim
    bsd = (cfg.batch, cfg.seq, d)

    e.emit(f"%zero = arith.constant 0.0 : {dt}")
    if acc != dt:
        e.emit(f"%zero_acc = arith.constant 0.0 : {acc}")

    def zeros(shape: tuple[int, ...], elem: str) -> str:
        empty, filled = e.fresh("e"), e.fresh("z")
        e.emit(f"{empty} = tensor.empty() : {_t(shape, elem)}")
        scalar = "%zero" if elem == dt else "%zero_acc"
        e.emit(f"{filled} = linalg.fill ins({scalar} : {elem}) outs({empty} : {_t(shape, elem)}) -> {_t(shape, elem)}")
        return filled

    def linear(x: str, w: str, rows: int, inner: int, out: int, out_elem: str = dt) -> str:
        """x[rows, inner] @ w[out, inner]^T"""
        init, y = zeros((rows, out), out_elem), e.fresh("mm")
        e.emit(f"{y} = linalg.matmul {_MATMUL_T} ins({x}, {w} : {_t((rows, inner), dt)}, {_t((out, inner), dt)}) "
               f"outs({init} : {_t((rows, out), out_elem)}) -> {_t((rows, out), out_elem)}")
        return y

    def collapse(x: str, shape: tuple[int, ...], groups: str, result: tuple[int, ...]) -> str:
        y = e.fresh("c")
        e.emit(f"{y} = tensor.collapse_shape {x} {groups} : {_t(shape, dt)} into {_t(result, dt)}")
        return y

    def expand(x: str, shape: tuple[int, ...], groups: str, result: tuple[int, ...]) -> str:
        y = e.fresh("x")
        out = ", ".join(str(s) for s in result)
        e.emit(f"{y} = tensor.expand_shape {x} {groups} output_shape [{out}] : {_t(shape, dt)} into {_t(result, dt)}")
        return y

    def add(a: str, b: str, shape: tuple[int, ...]) -> str:
        empty, y = e.fresh("e"), e.fresh("res")
        e.emit(f"{empty} = tensor.empty() : {_t(shape, dt)}")
        e.emit(f"{y} = linalg.add ins({a}, {b} : {_t(shape, dt)}, {_t(shape, dt)}) outs({empty} : {_t(shape, dt)}) -> {_t(shape, dt)}")
        return y

    def rms_norm(x: str, w: str) -> str:
        y = e.fresh("norm")
        e.emit(f"{y} = train.rms_norm {x}, {w} eps = {_f(cfg.norm_eps)} : {_t(bsd, dt)}, {_t((d,), dt)}")
        return y

    params = cfg.parameters()
    pname = {name: f"%p{i}" for i, (name, _) in enumerate(params)}
    x = e.fresh("h")
    e.emit(f"{x} = train.embedding {pname['embed']}[%tokens] : {_t((cfg.vocab, d), dt)}, "
           f"{_t((cfg.batch, cfg.seq), 'i32')} -> {_t(bsd, dt)}")
    kv = cfg.kv_heads * hd
    for i in range(cfg.layers):
        p = lambda s: pname[f"layers.{i}.{s}"]  # noqa: E731
        h = collapse(rms_norm(x, p("attn_norm")), bsd, "[[0, 1], [2]]", (n, d))
        heads = lambda t, count: expand(t, (n, count * hd), "[[0, 1], [2, 3]]",  # noqa: E731
                                        (cfg.batch, cfg.seq, count, hd))
        q = heads(linear(h, p("attn.wq"), n, d, d), cfg.heads)
        k = heads(linear(h, p("attn.wk"), n, d, kv), cfg.kv_heads)
        v = heads(linear(h, p("attn.wv"), n, d, kv), cfg.kv_heads)
        q_shape, kv_shape = (cfg.batch, cfg.seq, cfg.heads, hd), (cfg.batch, cfg.seq, cfg.kv_heads, hd)
        qr, kr, o = e.fresh("q"), e.fresh("k"), e.fresh("att")
        e.emit(f"{qr} = train.rope {q} theta = {_f(cfg.rope_theta)} : {_t(q_shape, dt)}")
        e.emit(f"{kr} = train.rope {k} theta = {_f(cfg.rope_theta)} : {_t(kv_shape, dt)}")
        e.emit(f"{o} = train.attention {qr}, {kr}, {v} causal scale = {_f(1.0 / math.sqrt(hd))} : "
               f"{_t(q_shape, dt)}, {_t(kv_shape, dt)}")
        attn = linear(collapse(o, q_shape, "[[0, 1], [2, 3]]", (n, d)), p("attn.wo"), n, d, d)
        x = add(x, expand(attn, (n, d), "[[0, 1], [2]]", bsd), bsd)

        h = collapse(rms_norm(x, p("mlp_norm")), bsd, "[[0, 1], [2]]", (n, d))
        gate = linear(h, p("mlp.w_gate"), n, d, cfg.ffn)
        up = linear(h, p("mlp.w_up"), n, d, cfg.ffn)
        empty, act = e.fresh("e"), e.fresh("swiglu")
        e.emit(f"{empty} = tensor.empty() : {_t((n, cfg.ffn), dt)}")
        e.emit(f"{act} = linalg.generic {{indexing_maps = [{_ID2}, {_ID2}, {_ID2}], "
               f"iterator_types = [\"parallel\", \"parallel\"]}} ins({gate}, {up} : {_t((n, cfg.ffn), dt)}, "
               f"{_t((n, cfg.ffn), dt)}) outs({empty} : {_t((n, cfg.ffn), dt)}) {{")
        e.emit(f"^bb0(%g: {dt}, %u: {dt}, %o: {dt}):")
        e.emit(f"  %one = arith.constant 1.0 : {dt}")
        e.emit(f"  %ng = arith.negf %g : {dt}")
        e.emit(f"  %ex = math.exp %ng : {dt}")
        e.emit(f"  %den = arith.addf %one, %ex : {dt}")
        e.emit(f"  %silu = arith.divf %g, %den : {dt}")
        e.emit(f"  %prod = arith.mulf %silu, %u : {dt}")
        e.emit(f"  linalg.yield %prod : {dt}")
        e.emit(f"}} -> {_t((n, cfg.ffn), dt)}")
        down = linear(act, p("mlp.w_down"), n, cfg.ffn, d)
        x = add(x, expand(down, (n, d), "[[0, 1], [2]]", bsd), bsd)

    h = collapse(rms_norm(x, pname["norm"]), bsd, "[[0, 1], [2]]", (n, d))
    # Logits accumulate (and the loss is computed) in f32 for bf16 models.
    logits = linear(h, pname["output"], n, d, cfg.vocab, out_elem=acc)
    labels, loss = e.fresh("labels"), "%loss"
    e.emit(f"{labels} = tensor.collapse_shape %labels [[0, 1]] : {_t((cfg.batch, cfg.seq), 'i32')} into {_t((n,), 'i32')}")
    e.emit(f"{loss} = train.cross_entropy {logits}, {labels} ignore_index = {cfg.ignore_index} reduction = <mean> "
           f"label_smoothing = {_f(cfg.label_smoothing)} z_loss = {_f(cfg.z_loss)} : "
           f"{_t((n, cfg.vocab), acc)}, {_t((n,), 'i32')} -> tensor<{acc}>")

    args = [f"{pname[name]}: {_t(shape, dt)} {{train.param = \"{name}\"}}" for name, shape in params]
    args += [f"%tokens: {_t((cfg.batch, cfg.seq), 'i32')} {{train.input = \"tokens\"}}",
             f"%labels: {_t((cfg.batch, cfg.seq), 'i32')} {{train.input = \"labels\"}}"]
    header = [
        f"// Llama-style decoder: {cfg.layers} layers, dim {d}, {cfg.heads} heads ({cfg.kv_heads} kv), "
        f"ffn {cfg.ffn}, vocab {cfg.vocab}, batch {cfg.batch} x seq {cfg.seq}, {dt}; "
        f"{cfg.num_parameters():,} parameters.",
        "func.func @forward(" + ",\n    ".join(args) + f") -> (tensor<{acc}> {{train.loss}}) {{",
    ]
    footer = [f"  return {loss} : tensor<{acc}>", "}", ""]
    return "\n".join(header + e.lines + footer)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m loom.models.llama",
                                     description="Emit the forward IR of a Llama-style model.")
    parser.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    for field in ("layers", "dim", "heads", "kv_heads", "ffn", "vocab", "seq", "batch"):
        parser.add_argument("--" + field.replace("_", "-"), type=int, dest=field)
    parser.add_argument("--dtype", choices=["f32", "bf16", "f64"])
    parser.add_argument("--rope-theta", type=float, dest="rope_theta")
    parser.add_argument("--label-smoothing", type=float, dest="label_smoothing")
    parser.add_argument("--z-loss", type=float, dest="z_loss")
    parser.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    overrides = {k: v for k, v in vars(args).items()
                 if k not in ("config", "output") and v is not None}
    cfg = dataclasses.replace(CONFIGS[args.config], **overrides)
    try:
        text = build_forward(cfg)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
