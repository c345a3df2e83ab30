"""Patterns the torch importer maps onto ``train`` ops: Hugging Face's
written-out RMSNorm onto ``train.rms_norm``, rotate-half RoPE onto
``train.rope``. Each matcher reads the FX graph from the pattern's last node
and returns the ``train`` op's result, or None (with a reason for the
remarks) when the pattern does not hold, in which case the nodes are
lowered one by one: the same math, as elementwise ops.

    rms_norm:  mul(w, mul(x, rsqrt(add(mean(pow(x, 2), [-1], keepdim), eps))))
    rope:      add(mul(q, cos), mul(cat([neg(q[..., h:]), q[..., :h]], -1), sin))

RoPE's cos and sin are folded constants; they are checked against
``train.rope``'s table for the theta their first rotation implies, so
scaled variants (Llama 3's, YaRN) and partial rotary stay elementwise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.fx

from loom.frontend._ir import Val, float_literal

if TYPE_CHECKING:
    from loom.frontend._lowering import Lowering


def _op(node) -> str:
    return str(node.target) if isinstance(node, torch.fx.Node) and node.op == "call_function" else ""


def _single_use(*nodes) -> bool:
    """Each node feeds one op (assertions aside): the pattern owns it."""
    return all(sum(1 for u in n.users if not _op(u).startswith("aten._assert")) == 1 for n in nodes)


def _either(node, first, second):
    """The operands of a binary ``node`` as (a, b) with ``first(a)`` true."""
    a, b = node.args[0], node.args[1]
    if first(a) and second(b):
        return a, b
    if first(b) and second(a):
        return b, a
    return None


def match_rms_norm(lw: "Lowering", node: torch.fx.Node) -> Val | None:
    if _op(node) != "aten.mul.Tensor" or len(node.args) != 2:
        return None
    pair = _either(node, lambda n: isinstance(n, torch.fx.Node) and n.meta["val"].dim() == 1,
                   lambda n: _op(n) == "aten.mul.Tensor")
    if pair is None:
        return None
    weight, normed = pair
    if not isinstance(normed.args[0], torch.fx.Node) or not isinstance(normed.args[1], torch.fx.Node):
        return None
    for x, scale in ((normed.args[0], normed.args[1]), (normed.args[1], normed.args[0])):
        if _op(scale) != "aten.rsqrt.default":
            continue
        add = scale.args[0]
        if _op(add) != "aten.add.Tensor" or isinstance(add.args[1], torch.fx.Node):
            continue
        mean = add.args[0]
        if _op(mean) != "aten.mean.dim" or list(mean.args[1]) not in ([-1], [x.meta["val"].dim() - 1]) or \
                not (len(mean.args) > 2 and mean.args[2]):
            continue
        square = mean.args[0]
        if _op(square) != "aten.pow.Tensor_Scalar" or square.args[0] is not x or square.args[1] != 2:
            continue
        if not _single_use(normed, scale, add, mean, square):
            return None
        eps = float(add.args[1])
        v, w = lw.tensor(x), lw.tensor(weight)
        if v.dtype != w.dtype or w.shape[0] != v.shape[-1] or eps <= 0:
            return None
        v = lw.e.materialize(v, node.name + "_x")
        w = lw.e.materialize(w, node.name + "_w")
        name = lw.e.fresh(node.name)
        lw.e.emit(f"{name} = train.rms_norm {v.name}, {w.name} eps = {float_literal(eps, 'f64')} : "
                  f"{v.type}, {w.type}")
        return Val(name, v.phys, v.dtype)
    return None


def match_rope(lw: "Lowering", node: torch.fx.Node) -> Val | None:
    if _op(node) != "aten.add.Tensor" or len(node.args) != 2 or not all(
            _op(a) == "aten.mul.Tensor" for a in node.args):
        return None
    for straight, rotated in ((node.args[0], node.args[1]), (node.args[1], node.args[0])):
        found = _rope_parts(lw, straight, rotated)
        if found is not None:
            return _emit_rope(lw, node, *found)
    return None


def _rope_parts(lw: "Lowering", straight, rotated):
    """(q, cos table, sin table) when ``straight`` is q * cos and ``rotated``
    is rotate_half(q) * sin."""
    pair = _either(straight, lambda n: n not in lw.const, lambda n: n in lw.const)
    if pair is None:
        return None
    q, cos = pair
    pair = _either(rotated, lambda n: _op(n) == "aten.cat.default", lambda n: n in lw.const)
    if pair is None:
        return None
    cat, sin = pair
    parts = cat.args[0]
    d = q.meta["val"].shape[-1]
    if q.meta["val"].dim() != 4 or d % 2 or len(parts) != 2 or cat.args[1] not in (-1, 3):
        return None
    neg, low = parts
    if _op(neg) != "aten.neg.default":
        return None
    high = neg.args[0]
    if not (_is_half(low, q, 0, d // 2) and _is_half(high, q, d // 2, d)):
        return None
    if not _single_use(cat, neg, high, rotated, straight):
        return None
    return q, lw.const[cos], lw.const[sin]


def _is_half(node, q, start, stop) -> bool:
    if _op(node) != "aten.slice.Tensor" or node.args[0] is not q:
        return False
    dim, begin = node.args[1], node.args[2] if len(node.args) > 2 else 0
    end = node.args[3] if len(node.args) > 3 else None
    d = q.meta["val"].shape[-1]
    end = d if end is None or end >= d else end
    return dim in (-1, 3) and begin == start and end == stop


def _emit_rope(lw: "Lowering", node, q, cos: torch.Tensor, sin: torch.Tensor) -> Val | None:
    shape = tuple(q.meta["val"].shape)
    d = shape[-1]
    try:
        cos, sin = cos.expand(shape).to(torch.float64), sin.expand(shape).to(torch.float64)
    except RuntimeError:
        return None
    # The sequence axis: where the table varies, dim 1 ([b, s, h, d]) or 2 ([b, h, s, d]).
    axis = 2 if shape[2] > 1 and not torch.equal(cos.select(2, 0), cos.select(2, shape[2] - 1)) else 1
    seq = shape[axis]
    table = cos.movedim(axis, 1)[0, :, 0, :]
    sine = sin.movedim(axis, 1)[0, :, 0, :]
    if seq < 2:
        lw.remarks.append(f"RoPE at '{node.name}': one position, kept elementwise")
        return None
    # theta from the slowest rotation at the last position (the most
    # precise angle of the f32 table): freq_j = theta^(-2j/d).
    j = d // 2 - 1
    angle = math.atan2(float(sine[seq - 1, j]), float(table[seq - 1, j]))
    if j < 1 or not 0.0 < angle < math.pi:
        lw.remarks.append(f"RoPE at '{node.name}': cos/sin tables of no theta, kept elementwise")
        return None
    theta = (angle / (seq - 1)) ** (-d / (2.0 * j))
    # Configs give round thetas (1e4, 5e5, 1e6): snap to one the table fits.
    nice = float(f"{theta:.6g}")
    if abs(nice - theta) <= 1e-5 * theta:
        theta = nice
    positions = torch.arange(seq, dtype=torch.float64)[:, None]
    freqs = theta ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    angles = torch.cat([positions * freqs] * 2, dim=-1)
    tolerance = 1e-6 + 4 * seq * 2.0 ** -23
    if not (torch.allclose(table, angles.cos(), atol=tolerance, rtol=0) and
            torch.allclose(sine, angles.sin(), atol=tolerance, rtol=0)):
        lw.remarks.append(f"RoPE at '{node.name}': the cos/sin tables are not train.rope's for theta "
                          f"{theta:.6g} (scaled RoPE?), kept elementwise")
        return None
    v = lw.tensor(q)
    layout = (0, 2, 1, 3) if axis == 2 else (0, 1, 2, 3)
    x = lw.e.materialize(v.permuted(layout), node.name + "_q")
    name = lw.e.fresh(node.name)
    lw.e.emit(f"{name} = train.rope {x.name} theta = {float_literal(theta, 'f64')} : {x.type}")
    return Val(name, x.phys, x.dtype).permuted(layout)
