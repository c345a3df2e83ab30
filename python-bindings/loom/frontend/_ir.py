"""Writing Loom's forward IR as text: SSA names, tensor types, and the few
op shapes the torch importer emits (elementwise and reducing
``linalg.generic``, matmuls, reshapes, slices, transposes, constants).

A :class:`Val` is an emitted tensor seen through a lazy permutation: the
value the importer means is ``physical.permute(perm)`` (torch's meaning of
``permute``), so a chain of permutes costs nothing until an op needs its
operand in memory order. Elementwise ops read a permuted operand through
their indexing maps and never materialise it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable, Sequence

import numpy as np

FLOATS = ("f16", "bf16", "f32", "f64")
_SSA = re.compile(r"%[A-Za-z_][A-Za-z0-9_]*")


@dataclasses.dataclass(frozen=True)
class Val:
    name: str                      # the SSA value, with its %
    phys: tuple[int, ...]          # the emitted tensor's shape
    dtype: str                     # element type: f32, i32, i1, ...
    perm: tuple[int, ...] | None = None  # logical dim i is physical dim perm[i]

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical shape (torch's)."""
        if self.perm is None:
            return self.phys
        return tuple(self.phys[p] for p in self.perm)

    @property
    def rank(self) -> int:
        return len(self.phys)

    @property
    def type(self) -> str:
        return tensor_type(self.phys, self.dtype)

    def permuted(self, perm: Sequence[int]) -> "Val":
        """``self.permute(perm)`` without emitting anything."""
        base = self.perm or tuple(range(self.rank))
        composed = tuple(base[p] for p in perm)
        return dataclasses.replace(self, perm=None if composed == tuple(range(self.rank)) else composed)


def tensor_type(shape: Sequence[int], dtype: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def inverse(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def affine_map(dims: int, results: Sequence[str]) -> str:
    names = ", ".join(f"d{i}" for i in range(dims))
    return f"affine_map<({names}) -> ({', '.join(results)})>"


def float_literal(value: float, dtype: str) -> str:
    if math.isnan(value):
        return {"f16": "0x7E00", "bf16": "0x7FC0", "f32": "0x7FC00000", "f64": "0x7FF8000000000000"}[dtype]
    if math.isinf(value):
        bits = {"f16": (0x7C00, 0xFC00), "bf16": (0x7F80, 0xFF80), "f32": (0x7F800000, 0xFF800000),
                "f64": (0x7FF0000000000000, 0xFFF0000000000000)}[dtype]
        return hex(bits[0] if value > 0 else bits[1])
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exponent if exponent else "")


def reassociation(src: Sequence[int], dst: Sequence[int]) -> list[list[int]] | None:
    """Groups of ``src`` dims that collapse into each ``dst`` dim, or None
    when ``dst`` is not a coarsening of ``src``. Unit dims left at the end
    join the last group."""
    if not dst:
        return [] if all(d == 1 for d in src) else None
    groups: list[list[int]] = []
    i = 0
    for size in dst:
        group, product = [], 1
        while i < len(src) and (not group or product < size):
            group.append(i)
            product *= src[i]
            i += 1
        if product != size or not group:
            return None
        groups.append(group)
    for k in range(i, len(src)):
        if src[k] != 1:
            return None
        groups[-1].append(k)
    return groups


def dense_literal(array: np.ndarray, dtype: str) -> str:
    """A ``dense<...>`` attribute for ``array`` as ``dtype``."""
    flat = array.reshape(-1)
    if flat.size and np.all(flat == flat[0]):
        return f"dense<{_scalar_text(flat[0], dtype)}>"
    if dtype == "i1" or flat.size <= 16:
        body = ", ".join(_scalar_text(v, dtype) for v in flat)
        return f"dense<{_nest(body.split(', '), array.shape)}>"
    numpy_type = {"f32": "<f4", "f64": "<f8", "i32": "<i4", "i64": "<i8", "f16": "<f2"}.get(dtype)
    if numpy_type is None:
        raise ValueError(f"no dense hex form for {dtype} constants")
    return 'dense<"0x' + array.astype(numpy_type).tobytes().hex().upper() + '">'


def _scalar_text(value, dtype: str) -> str:
    if dtype == "i1":
        return "true" if bool(value) else "false"
    if dtype in FLOATS:
        return float_literal(float(value), dtype)
    return str(int(value))


def _nest(items: list[str], shape: Sequence[int]) -> str:
    if not shape:
        return items[0]
    if len(shape) == 1:
        return "[" + ", ".join(items) + "]"
    step = len(items) // shape[0] if shape[0] else 0
    return "[" + ", ".join(_nest(items[k * step:(k + 1) * step], shape[1:]) for k in range(shape[0])) + "]"


class Body:
    """The scalar body of a ``linalg.generic``: block arguments, then ops."""

    def __init__(self, args: Sequence[str], dtypes: Sequence[str]):
        self.args = list(args)
        self.dtypes = list(dtypes)
        self.lines: list[str] = []
        self._next = 0

    def op(self, text: str, dtype: str) -> str:
        """Emits ``%bN = <text> : dtype`` and returns %bN."""
        return self.typed(f"{text} : {dtype}")

    def typed(self, text: str) -> str:
        """Emits ``%bN = <text>`` (text ending in its own types)."""
        name = f"%b{self._next}"
        self._next += 1
        self.lines.append(f"{name} = {text}")
        return name

    def const(self, value, dtype: str) -> str:
        return self.op(f"arith.constant {_scalar_text(value, dtype)}", dtype)

    def cast(self, value: str, src: str, dst: str) -> str:
        """Converts a scalar between element types the way torch does."""
        if src == dst:
            return value
        if src in FLOATS and dst in FLOATS:
            wider = FLOATS.index(dst) > FLOATS.index(src) if {src, dst} != {"f16", "bf16"} else None
            if wider is None:
                value = self.typed(f"arith.extf {value} : {src} to f32")
                return self.typed(f"arith.truncf {value} : f32 to {dst}")
            return self.typed(f"arith.{'extf' if wider else 'truncf'} {value} : {src} to {dst}")
        if src == "i1" and dst in FLOATS:
            return self.typed(f"arith.uitofp {value} : i1 to {dst}")
        if src.startswith("i") and dst in FLOATS:
            return self.typed(f"arith.sitofp {value} : {src} to {dst}")
        if src == "i1" and dst.startswith("i"):
            return self.typed(f"arith.extui {value} : i1 to {dst}")
        if src.startswith("i") and dst.startswith("i"):
            op = "arith.extsi" if int(dst[1:]) > int(src[1:]) else "arith.trunci"
            return self.typed(f"{op} {value} : {src} to {dst}")
        raise ValueError(f"no conversion from {src} to {dst}")


class Emitter:
    """Accumulates the forward's body; every helper returns the new Val."""

    def __init__(self):
        self.lines: list[str] = []
        self._names: set[str] = set()
        self._reshaped_from: dict[str, Val] = {}

    def fresh(self, hint: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
        if base[0].isdigit():
            base = "v" + base
        name, k = base, 0
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return "%" + name

    def reserve(self, name: str) -> None:
        self._names.add(name.lstrip("%"))

    def emit(self, text: str) -> None:
        """Appends one op (its text may span lines)."""
        self.lines.append(text)

    def live_lines(self, results: Sequence[str]) -> list[str]:
        """The ops ``results`` depend on, in order (every op emitted here is
        free of side effects, so the rest is dead)."""
        live = set(results)
        kept = []
        for text in reversed(self.lines):
            defined = text.split(" = ", 1)[0] if text.startswith("%") else None
            if defined is not None and defined not in live:
                continue
            kept.append(text)
            live.update(_SSA.findall(text.split(" = ", 1)[1] if defined else text))
        kept.reverse()
        return kept

    # --- constants and initial values -------------------------------------

    def constant(self, array: np.ndarray, dtype: str, hint: str = "cst") -> Val:
        name = self.fresh(hint)
        shape = tuple(array.shape)
        self.emit(f"{name} = arith.constant {dense_literal(array, dtype)} : {tensor_type(shape, dtype)}")
        return Val(name, shape, dtype)

    def filled(self, shape: Sequence[int], dtype: str, value: float, hint: str = "init") -> Val:
        empty, scalar, name = self.fresh(hint + "_e"), self.fresh(hint + "_c"), self.fresh(hint)
        t = tensor_type(shape, dtype)
        self.emit(f"{empty} = tensor.empty() : {t}")
        self.emit(f"{scalar} = arith.constant {_scalar_text(value, dtype)} : {dtype}")
        self.emit(f"{name} = linalg.fill ins({scalar} : {dtype}) outs({empty} : {t}) -> {t}")
        return Val(name, tuple(shape), dtype)

    # --- layout ------------------------------------------------------------

    def materialize(self, v: Val, hint: str = "t") -> Val:
        """``v`` in memory order (a ``linalg.transpose`` when permuted)."""
        if v.perm is None:
            return v
        shape = v.shape
        empty, name = self.fresh(hint + "_e"), self.fresh(hint)
        out = tensor_type(shape, v.dtype)
        self.emit(f"{empty} = tensor.empty() : {out}")
        self.emit(f"{name} = linalg.transpose ins({v.name} : {v.type}) outs({empty} : {out}) "
                  f"permutation = [{', '.join(map(str, v.perm))}]")
        return Val(name, shape, v.dtype)

    def reshape(self, v: Val, shape: Sequence[int], hint: str = "r") -> Val:
        """``v.reshape(shape)``: a collapse, an expand, or a collapse then an expand."""
        shape = tuple(shape)
        if v.shape == shape:  # a view of the same shape: nothing to do
            return v
        v = self.materialize(v, hint + "_t")
        if v.phys == shape:
            return v
        # Undo a reshape rather than stack a second one on it (the fused
        # loss matches a matmul feeding the loss directly).
        origin = self._reshaped_from.get(v.name)
        if origin is not None and origin.phys == shape:
            return origin
        out = self._reshape(v, shape, hint)
        self._reshaped_from[out.name] = self._reshaped_from.get(v.name, v)
        return out

    def _reshape(self, v: Val, shape: tuple[int, ...], hint: str) -> Val:
        groups = reassociation(v.phys, shape)
        if groups is not None:
            return self._collapse(v, groups, shape, hint)
        groups = reassociation(shape, v.phys)
        if groups is not None:
            return self._expand(v, groups, shape, hint)
        flat = (math.prod(shape),)
        return self._reshape(self._reshape(v, flat, hint + "_f"), shape, hint)

    def _collapse(self, v: Val, groups, shape, hint) -> Val:
        name = self.fresh(hint)
        out = tensor_type(shape, v.dtype)
        self.emit(f"{name} = tensor.collapse_shape {v.name} {groups} : {v.type} into {out}")
        return Val(name, shape, v.dtype)

    def _expand(self, v: Val, groups, shape, hint) -> Val:
        name = self.fresh(hint)
        out = tensor_type(shape, v.dtype)
        self.emit(f"{name} = tensor.expand_shape {v.name} {groups} output_shape "
                  f"[{', '.join(map(str, shape))}] : {v.type} into {out}")
        return Val(name, shape, v.dtype)

    def drop_unit_dims(self, v: Val, phys_dims: Sequence[int], hint: str = "sq") -> Val:
        """Collapses away the given unit physical dims (keeping ``perm`` valid)."""
        drop = set(phys_dims)
        if not drop:
            return v
        kept = [k for k in range(v.rank) if k not in drop]
        shape = tuple(v.phys[k] for k in kept)
        if not kept:
            groups: list[list[int]] = []
        else:
            # A dropped dim joins the kept dim before it (the first one
            # when none is before it).
            groups = [[] for _ in kept]
            owner = 0
            for k in range(v.rank):
                if k not in drop:
                    owner = kept.index(k)
                groups[owner].append(k)
        name = self.fresh(hint)
        out = tensor_type(shape, v.dtype)
        self.emit(f"{name} = tensor.collapse_shape {v.name} {groups} : {v.type} into {out}")
        perm = None
        if v.perm is not None:
            renumber = {k: i for i, k in enumerate(kept)}
            perm = tuple(renumber[p] for p in v.perm if p in renumber)
            if perm == tuple(range(len(perm))):
                perm = None
        return Val(name, shape, v.dtype, perm)

    # --- linalg.generic ----------------------------------------------------

    def elementwise(self, out_shape: Sequence[int], out_dtype: str, operands: Sequence[Val],
                    body: Callable[[Body, list[str]], str], hint: str = "ew",
                    layout: tuple[int, ...] | None = None) -> Val:
        """A ``linalg.generic`` over ``out_shape`` (torch broadcasting).

        ``body(b, scalars)`` gets one block argument per operand and returns
        the result's scalar (python numbers are the handlers' constants, in
        the type they compute in). The result takes the layout of the first
        operand of the full shape, so permutes flow through."""
        out_shape = tuple(out_shape)
        n = len(out_shape)
        if layout is None:
            for x in operands:
                if x.shape == out_shape and x.perm is not None:
                    layout = x.perm
                    break
        out_inv = inverse(layout) if layout else list(range(n))
        out_phys = tuple(out_shape[out_inv[k]] for k in range(n)) if layout else out_shape
        ins, maps, types, arg_dtypes = [], [], [], []
        for x in operands:
            r = x.rank
            if r > n:
                raise ValueError(f"operand of rank {r} broadcast to rank {n}")
            logical = x.shape
            perm = x.perm or tuple(range(r))
            drop_logical = [i for i in range(r) if logical[i] == 1 and out_shape[n - r + i] != 1]
            y = self.drop_unit_dims(x, [perm[i] for i in drop_logical], hint + "_b")
            kept = [i for i in range(r) if i not in drop_logical]
            y_perm = y.perm or tuple(range(y.rank))
            y_inv = inverse(y_perm)
            results = [f"d{n - r + kept[y_inv[k]]}" for k in range(y.rank)]
            ins.append(y)
            maps.append(affine_map(n, results))
            types.append(y.type)
            arg_dtypes.append(y.dtype)
        maps.append(affine_map(n, [f"d{out_inv[k]}" for k in range(n)]))
        args = [f"%a{i}" for i in range(len(ins))]
        b = Body(args + ["%out"], arg_dtypes + [out_dtype])
        result = body(b, args)
        empty, name = self.fresh(hint + "_e"), self.fresh(hint)
        out_t = tensor_type(out_phys, out_dtype)
        self.emit(f"{empty} = tensor.empty() : {out_t}")
        self._generic(name, maps, ["parallel"] * n, ins, types, args, arg_dtypes, empty, out_t, out_dtype,
                      b, result)
        return Val(name, out_phys, out_dtype, layout if layout and tuple(layout) != tuple(range(n)) else None)

    def reduce_sum(self, v: Val, dims: Sequence[int], dtype: str, hint: str = "sum") -> Val:
        """Sums ``v`` over its logical ``dims`` (the additive form autodiff
        differentiates); the result drops those dims."""
        n = v.rank
        dims = sorted(d % n for d in dims) if n else []
        kept = [i for i in range(n) if i not in dims]
        shape = tuple(v.shape[i] for i in kept)
        init = self.filled(shape, dtype, 0.0 if dtype in FLOATS else 0, hint + "_z")
        perm = v.perm or tuple(range(n))
        inv = inverse(perm)
        in_map = affine_map(n, [f"d{inv[k]}" for k in range(n)])
        out_map = affine_map(n, [f"d{i}" for i in kept])
        iters = ["reduction" if i in dims else "parallel" for i in range(n)]
        b = Body(["%a0", "%out"], [v.dtype, dtype])
        x = b.cast("%a0", v.dtype, dtype)
        total = b.op(f"arith.addf %out, {x}" if dtype in FLOATS else f"arith.addi %out, {x}", dtype)
        name = self.fresh(hint)
        out_t = tensor_type(shape, dtype)
        self._generic(name, [in_map, out_map], iters, [v], [v.type], ["%a0"], [v.dtype], init.name, out_t,
                      dtype, b, total)
        return Val(name, shape, dtype)

    def _generic(self, name, maps, iters, ins, types, args, arg_dtypes, out, out_t, out_dtype, body: Body,
                 result) -> None:
        ins_text = ", ".join(x.name for x in ins)
        iter_text = ", ".join(f'"{t}"' for t in iters)
        head = (f"{name} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iter_text}]}} "
                + (f"ins({ins_text} : {', '.join(types)}) " if ins else "")
                + f"outs({out} : {out_t}) {{")
        block_args = ", ".join(f"{a}: {t}" for a, t in zip(args + ["%out"], arg_dtypes + [out_dtype]))
        self.emit("\n".join([head, f"^bb0({block_args}):"] + ["  " + line for line in body.lines] +
                            [f"  linalg.yield {result} : {out_dtype}", f"}} -> {out_t}"]))

    # --- contractions --------------------------------------------------------

    def matmul(self, a: Val, b: Val, hint: str = "mm") -> Val:
        """``a @ b`` for 2-D ``a [M, K]`` and ``b [K, N]`` (either may be a
        lazy transpose: the maps read it in place)."""
        (m, _), (_, n) = a.shape, b.shape
        a_map = "(m, k)" if a.perm is None else "(k, m)"
        b_map = "(k, n)" if b.perm is None else "(n, k)"
        init = self.filled((m, n), a.dtype, 0.0, hint + "_z")
        name = self.fresh(hint)
        maps = ", ".join(f"affine_map<(m, n, k) -> {x}>" for x in (a_map, b_map, "(m, n)"))
        out_t = tensor_type((m, n), a.dtype)
        self.emit(f"{name} = linalg.matmul indexing_maps = [{maps}] ins({a.name}, {b.name} : {a.type}, {b.type}) "
                  f"outs({init.name} : {out_t}) -> {out_t}")
        return Val(name, (m, n), a.dtype)

    def batch_matmul(self, a: Val, b: Val, hint: str = "bmm") -> Val:
        """``a @ b`` for ``a [B, M, K]`` and ``b [B, K, N]`` in memory order,
        or ``b`` a lazy ``[B, N, K]`` transpose of its last two dims."""
        (bs, m, _), (_, _, n) = a.shape, b.shape
        a = self.materialize(a, hint + "_a")
        b_map = "(b, k, n)"
        if b.perm == (0, 2, 1):
            b_map = "(b, n, k)"
        else:
            b = self.materialize(b, hint + "_b")
        init = self.filled((bs, m, n), a.dtype, 0.0, hint + "_z")
        name = self.fresh(hint)
        maps = ", ".join(f"affine_map<(b, m, n, k) -> {x}>" for x in ("(b, m, k)", b_map, "(b, m, n)"))
        out_t = tensor_type((bs, m, n), a.dtype)
        self.emit(f"{name} = linalg.batch_matmul indexing_maps = [{maps}] ins({a.name}, {b.name} : "
                  f"{a.type}, {b.type}) outs({init.name} : {out_t}) -> {out_t}")
        return Val(name, (bs, m, n), a.dtype)

    # --- slices ----------------------------------------------------------------

    def slice(self, v: Val, dim: int, start: int, stop: int, hint: str = "sl") -> Val:
        """``v`` narrowed along logical ``dim`` to ``[start, stop)``."""
        k = v.perm[dim] if v.perm else dim
        offsets = ["0"] * v.rank
        sizes = [str(d) for d in v.phys]
        offsets[k], sizes[k] = str(start), str(stop - start)
        phys = list(v.phys)
        phys[k] = stop - start
        name = self.fresh(hint)
        out = Val(name, tuple(phys), v.dtype, v.perm)
        self.emit(f"{name} = tensor.extract_slice {v.name}[{', '.join(offsets)}] [{', '.join(sizes)}] "
                  f"[{', '.join(['1'] * v.rank)}] : {v.type} to {out.type}")
        return out

    def concat(self, vals: Sequence[Val], dim: int, hint: str = "cat") -> Val:
        perms = {v.perm for v in vals}
        if len(perms) != 1:
            vals = [self.materialize(v, hint + "_t") for v in vals]
        perm = vals[0].perm
        k = perm[dim] if perm else dim
        phys = list(vals[0].phys)
        phys[k] = sum(v.phys[k] for v in vals)
        name = self.fresh(hint)
        out = Val(name, tuple(phys), vals[0].dtype, perm)
        self.emit(f"{name} = tensor.concat dim({k}) {', '.join(v.name for v in vals)} : "
                  f"({', '.join(v.type for v in vals)}) -> {out.type}")
        return out

