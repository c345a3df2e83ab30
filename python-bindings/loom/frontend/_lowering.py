"""From a ``torch.export`` graph to Loom's forward IR (see docs/Import.md).

The walk is in three steps:

1. **Fold.** Every node that reads no parameter and no user input (the
   causal mask, RoPE's cos/sin tables, position ids) is evaluated with
   torch at import time.
2. **Match.** Grouped-query ``repeat_kv`` expansions in front of
   ``scaled_dot_product_attention`` are skipped: the attention reads the
   kv heads directly. Only the nodes the loss needs are then lowered.
3. **Lower.** Each remaining node becomes IR: attention, embedding and
   cross-entropy become ``train`` ops, linear layers ``linalg.matmul``,
   everything elementwise a ``linalg.generic`` that reads permuted
   operands in place, reshapes ``tensor`` ops.

Anything else is an :class:`UnsupportedError` naming the op, the node and
the user's source line: never a silent change of the math.
"""

from __future__ import annotations

import collections
import math
import operator
import os
from typing import Any, Callable

import numpy as np
import torch
import torch.fx

from loom.frontend._ir import FLOATS, Body, Emitter, Val, float_literal
from loom.frontend._patterns import match_rms_norm, match_rope

_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16", torch.float16: "f16",
           torch.int64: "i32", torch.int32: "i32", torch.int16: "i32", torch.uint8: "i32", torch.int8: "i32",
           torch.bool: "i1"}


class UnsupportedError(ValueError):
    """A graph the importer cannot lower without changing its meaning."""

    def __init__(self, node: torch.fx.Node | None, reason: str):
        where = ""
        if node is not None:
            target = node.target if isinstance(node.target, str) else _op_name(node)
            where = f"{target} (FX node '{node.name}'{_source(node)}): "
        super().__init__(where + reason)
        self.node = node


def _op_name(node: torch.fx.Node) -> str:
    return str(node.target) if not callable(node.target) or hasattr(node.target, "_schema") \
        else getattr(node.target, "__name__", str(node.target))


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _source(node: torch.fx.Node) -> str:
    """`, at file:line: code` from the node's stack trace: the innermost
    frame outside torch itself (the model's code, not nn.Linear's)."""
    trace = node.meta.get("stack_trace") or ""
    frames = [line.strip() for line in trace.splitlines() if line.strip()]
    for k in range(len(frames) - 1, -1, -1):
        if frames[k].startswith("File "):
            parts = frames[k].split(", ")
            file = parts[0][len("File "):].strip('"')
            if file.startswith(_TORCH_DIR):
                continue
            line = parts[1].replace("line ", "") if len(parts) > 1 else "?"
            code = frames[k + 1] if k + 1 < len(frames) and not frames[k + 1].startswith("File ") else ""
            return f", at {file}:{line}" + (f": {code}" if code else "")
    return ""


def _dtype(node: torch.fx.Node) -> str:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        raise UnsupportedError(node, "the node has no tensor value")
    if val.dtype not in _DTYPES:
        raise UnsupportedError(node, f"tensors of {val.dtype} are not supported")
    return _DTYPES[val.dtype]


def _shape(node: torch.fx.Node) -> tuple[int, ...]:
    val = node.meta.get("val")
    shape = []
    for d in val.shape:
        if not isinstance(d, int):
            raise UnsupportedError(node, f"dynamic dimension {d}: export with static shapes "
                                         "(no torch.export.Dim)")
        shape.append(d)
    return tuple(shape)


def arguments(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in."""
    schema = node.target._schema
    out: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            out[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            out[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
    return out


_SKIPPED = {"aten._assert_tensor_metadata.default", "aten._assert_scalar.default",
            "aten._assert_async.msg", "aten.sym_constrain_range_for_size.default"}
_IDENTITY = {"aten.clone.default", "aten.alias.default", "aten.contiguous.default", "aten.detach.default",
             "aten.lift_fresh_copy.default", "aten.dropout.default", "aten.native_dropout.default"}
_RESHAPES = {"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.unsqueeze.default",
             "aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.flatten.using_ints"}


class Lowering:
    """Lowers one exported program; ``run()`` returns the module's text."""

    def __init__(self, program: torch.export.ExportedProgram, param_names: dict[str, str],
                 input_names: dict[str, str], buffers: dict[str, torch.Tensor] | None = None):
        self.program = program
        self.graph = program.graph_module.graph
        self.e = Emitter()
        self.param_names = param_names    # placeholder -> train.param name
        self.input_names = input_names    # placeholder -> train.input name
        # Real values of buffers the program holds on the meta device.
        self.buffers = buffers or {}
        self.const: dict[torch.fx.Node, Any] = {}
        self.vals: dict[torch.fx.Node, Any] = {}
        self.const_vals: dict[torch.fx.Node, Val] = {}
        self.kv_source: dict[torch.fx.Node, torch.fx.Node] = {}
        self.args: list[str] = []
        self.params: dict[str, Val] = {}
        # Patterns mapped onto train ops, and why others were not.
        self.matched: collections.Counter[str] = collections.Counter()
        self.remarks: list[str] = []
        self.loss: Val | None = None

    # --- the three steps ----------------------------------------------------

    def run(self) -> str:
        signature = self.program.graph_signature
        if signature.buffers_to_mutate or signature.user_inputs_to_mutate:
            raise UnsupportedError(None, "the forward mutates buffers or inputs "
                                         f"({list(signature.buffers_to_mutate) or list(signature.user_inputs_to_mutate)}): "
                                         "a training forward must be functional")
        constants = {**self.program.state_dict, **self.program.constants}
        kinds = {spec.arg.name: spec for spec in signature.input_specs}
        for node in self.graph.nodes:
            if node.op == "placeholder":
                spec = kinds[node.name]
                if spec.kind.name in ("BUFFER", "CONSTANT_TENSOR"):
                    value = self.buffers.get(spec.target, constants[spec.target])
                    if value.device.type == "meta":
                        raise UnsupportedError(node, f"the constant '{spec.target}' is on the meta device: "
                                                     "buffers must hold their values (see empty_weights)")
                    self.const[node] = value
            elif node.op == "call_function":
                self._fold(node)
            elif node.op == "get_attr":
                self.const[node] = getattr(self.program.graph_module, node.target)
        self._match_grouped_kv()
        needed = self._needed()
        for node in self.graph.nodes:
            if node.op == "placeholder":
                self._placeholder(node, node in needed)
            elif node.op == "call_function" and node in needed and node not in self.const:
                self.vals[node] = self._lower(node)
            elif node.op == "output":
                self._output(node)
        header = ",\n    ".join(self.args)
        body = "\n".join("  " + line.replace("\n", "\n  ") for line in self.e.live_lines([self.loss.name]))
        return (f"func.func @forward({header}) -> ({self.loss.type} {{train.loss}}) {{\n{body}\n"
                f"  return {self.loss.name} : {self.loss.type}\n}}\n")

    def _fold(self, node: torch.fx.Node) -> None:
        inputs = [n for n in node.all_input_nodes]
        if any(n not in self.const for n in inputs):
            return
        name = _op_name(node)
        if name in _SKIPPED:
            return
        args = torch.fx.node.map_arg(node.args, lambda n: self.const[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.const[n])
        if isinstance(kwargs.get("device"), torch.device) and kwargs["device"].type == "meta":
            kwargs = {**kwargs, "device": torch.device("cpu")}  # a meta export folds on the CPU
        try:
            self.const[node] = node.target(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 -- reported with the node
            raise UnsupportedError(node, f"folding a constant failed: {error}") from error

    def _match_grouped_kv(self) -> None:
        """``repeat_kv``: view(clone?(expand(unsqueeze(kv, 2)))) in front of
        attention, widening kv heads to the query heads."""
        for node in self.graph.nodes:
            if _op_name(node) != "aten.scaled_dot_product_attention.default":
                continue
            for operand in node.args[1:3]:
                source = self._repeat_kv_source(operand)
                if source is not None:
                    self.kv_source[operand] = source

    @staticmethod
    def _repeat_kv_source(node) -> torch.fx.Node | None:
        if not isinstance(node, torch.fx.Node) or _op_name(node) not in _RESHAPES:
            return None
        expanded = node.args[0]
        if _op_name(expanded) in ("aten.clone.default", "aten.contiguous.default"):
            expanded = expanded.args[0]
        if _op_name(expanded) != "aten.expand.default":
            return None
        unsqueezed = expanded.args[0]
        if _op_name(unsqueezed) != "aten.unsqueeze.default" or unsqueezed.args[1] != 2:
            return None
        source = unsqueezed.args[0]
        b, hkv, s, d = _shape(source)
        big = _shape(expanded)
        if len(big) != 5 or big[:2] != (b, hkv) or big[3:] != (s, d) or _shape(node) != (b, hkv * big[2], s, d):
            return None
        return source

    def _needed(self) -> set[torch.fx.Node]:
        """The nodes the output reads, through matched patterns."""
        output = next(n for n in self.graph.nodes if n.op == "output")
        needed, stack = set(), [output]
        while stack:
            node = stack.pop()
            if node in needed:
                continue
            needed.add(node)
            if node in self.const and node.op != "placeholder":
                continue
            for n in node.all_input_nodes:
                stack.append(self.kv_source.get(n, n) if node.op == "call_function" and
                             _op_name(node) == "aten.scaled_dot_product_attention.default" else n)
        return needed

    # --- values -------------------------------------------------------------------

    def _placeholder(self, node: torch.fx.Node, used: bool) -> None:
        if node in self.const:
            return
        shape, dtype = _shape(node), _dtype(node)
        if node.name in self.param_names:
            param = self.param_names[node.name]
            if not used:
                return
            if param in self.params:  # a tied alias: the same argument
                self.vals[node] = self.params[param]
                return
            if dtype not in ("f32", "f64"):
                raise UnsupportedError(node, f"parameter '{param}' is {dtype}: the importer takes f32 models "
                                             "(f64 for checking); train in bf16 with loomc's precision options")
            name = self.e.fresh("p" + str(len(self.args)))
            self.args.append(f"{name}: {Val(name, shape, dtype).type} {{train.param = \"{param}\"}}")
            self.params[param] = Val(name, shape, dtype)
        else:
            input_name = self.input_names[node.name]
            name = self.e.fresh(input_name)
            self.args.append(f"{name}: {Val(name, shape, dtype).type} {{train.input = \"{input_name}\"}}")
        self.vals[node] = Val(name, shape, dtype)

    def _output(self, node: torch.fx.Node) -> None:
        results = node.args[0]
        if not isinstance(results, (tuple, list)) or len(results) != 1:
            raise UnsupportedError(node, f"the forward returns {len(results)} values: it must return only the "
                                         "scalar training loss")
        result = results[0]
        if not isinstance(result, torch.fx.Node) or result in self.const:
            raise UnsupportedError(node, "the loss does not depend on the parameters and inputs")
        loss = self.vals[result]
        if loss.shape != () or loss.dtype not in ("f32", "f64"):
            raise UnsupportedError(result, f"the forward's result is {loss.type}: it must be the scalar f32 loss")
        self.loss = loss

    def value(self, arg) -> Val | float | int | bool:
        """An operand as a Val, or a python scalar for 0-d constants."""
        if not isinstance(arg, torch.fx.Node):
            return arg
        if arg in self.const:
            value = self.const[arg]
            if isinstance(value, torch.Tensor):
                if value.dim() == 0:
                    return value.item()
                return self._constant(arg, value)
            return value
        return self.vals[arg]

    def tensor(self, arg) -> Val:
        v = self.value(arg)
        if not isinstance(v, Val):
            raise UnsupportedError(arg if isinstance(arg, torch.fx.Node) else None, "expected a tensor operand")
        return v

    def _constant(self, node: torch.fx.Node, value: torch.Tensor) -> Val:
        if node not in self.const_vals:
            dtype = _DTYPES.get(value.dtype)
            if dtype is None:
                raise UnsupportedError(node, f"constant of {value.dtype}")
            array = value.detach().to(torch.float32 if value.dtype == torch.bfloat16 else value.dtype).numpy()
            if dtype == "i32":
                if array.size and (array.min() < -2**31 or array.max() >= 2**31):
                    raise UnsupportedError(node, "an integer constant outside the i32 range")
                array = array.astype(np.int32)
            self.const_vals[node] = self.e.constant(array, dtype, "cst_" + node.name)
        return self.const_vals[node]

    # --- the op table -------------------------------------------------------------

    def _lower(self, node: torch.fx.Node):
        name = _op_name(node)
        if name in _SKIPPED:
            return None
        if node.target is operator.getitem:
            return self.vals[node.args[0]][node.args[1]]
        for match in (match_rms_norm, match_rope):
            matched = match(self, node)
            if matched is not None:
                self.matched[match.__name__[len("match_"):]] += 1
                return matched
        handler = _HANDLERS.get(name)
        if handler is None:
            hint = _REFUSED.get(name, "Loom's importer has no lowering for it")
            raise UnsupportedError(node, hint)
        return handler(self, node, arguments(node))


# --- handlers: each takes (lowering, node, schema-named arguments) -----------------


def _identity(lw: Lowering, node, a):
    name = _op_name(node)
    if name == "aten.native_dropout.default" or name == "aten.dropout.default":
        p, train = a.get("p", 0.0), a.get("train", True)
        if train and p:
            raise UnsupportedError(node, f"dropout with p={p} in training mode: Loom trains without dropout; "
                                         "set the model's dropout probabilities to 0 (or export it in eval mode)")
        x = lw.tensor(a["input"])
        return [x, None] if name == "aten.native_dropout.default" else x
    return lw.tensor(node.args[0])


def _to_copy(lw: Lowering, node, a):
    x = lw.tensor(a["self"])
    dtype = _dtype(node)
    if dtype == x.dtype:
        return x
    return lw.e.elementwise(x.shape, dtype, [x], lambda b, s: b.cast(s[0], x.dtype, dtype), node.name)


def _reshape(lw: Lowering, node, a):
    return lw.e.reshape(lw.tensor(node.args[0]), _shape(node), node.name)


def _permute(lw: Lowering, node, a):
    x = lw.tensor(a["self"])
    name = _op_name(node)
    if name == "aten.permute.default":
        perm = [d % x.rank for d in a["dims"]]
    else:
        perm = list(range(x.rank))
        if name == "aten.transpose.int":
            i, j = a["dim0"] % x.rank, a["dim1"] % x.rank
            perm[i], perm[j] = perm[j], perm[i]
        else:  # t
            perm.reverse()
    return x.permuted(perm)


def _expand(lw: Lowering, node, a):
    x = lw.tensor(a["self"])
    shape = _shape(node)
    if x.shape == shape:
        return x
    return lw.e.elementwise(shape, x.dtype, [x], lambda b, s: s[0], node.name)


def _slice(lw: Lowering, node, a):
    x = lw.tensor(a["self"])
    dim = a["dim"] % x.rank
    size = x.shape[dim]
    start, end, step = a.get("start") or 0, a.get("end"), a.get("step", 1)
    if step != 1:
        raise UnsupportedError(node, f"a slice with step {step}")
    start = max(0, min(size, start + size if start < 0 else start))
    end = size if end is None else max(0, min(size, end + size if end < 0 else end))
    if start == 0 and end == size:
        return x
    return lw.e.slice(x, dim, start, max(start, end), node.name)


def _select(lw: Lowering, node, a):
    x = lw.tensor(a["self"])
    dim, index = a["dim"] % x.rank, a["index"]
    index = index + x.shape[dim] if index < 0 else index
    sliced = lw.e.slice(x, dim, index, index + 1, node.name + "_s")
    return lw.e.reshape(sliced, _shape(node), node.name)


def _split(lw: Lowering, node, a):
    x = lw.tensor(a["self"])
    dim = a["dim"] % x.rank
    total = x.shape[dim]
    if _op_name(node) == "aten.split_with_sizes.default":
        sizes = list(a["split_sizes"])
    else:
        step = a["split_size"]
        sizes = [min(step, total - k) for k in range(0, total, step)]
    out, start = [], 0
    for k, size in enumerate(sizes):
        out.append(x if size == total else lw.e.slice(x, dim, start, start + size, f"{node.name}_{k}"))
        start += size
    return out


def _cat(lw: Lowering, node, a):
    parts = [lw.tensor(t) for t in a["tensors"] if not (isinstance(t, torch.fx.Node) and 0 in _shape(t))]
    if len(parts) == 1:
        return parts[0]
    return lw.e.concat(parts, a["dim"] % parts[0].rank, node.name)


def _unary(body: Callable[[Body, str, str], str]):
    def handler(lw: Lowering, node, a):
        x = lw.tensor(node.args[0])
        dtype = _dtype(node)
        return lw.e.elementwise(_shape(node), dtype, [x], lambda b, s: body(b, b.cast(s[0], x.dtype, dtype), dtype),
                                node.name)
    return handler


def _binary(body: Callable[[Body, str, str, str], str], compare: bool = False):
    """``body(b, x, y, dtype)`` on both operands cast to the computation's type."""
    def handler(lw: Lowering, node, a):
        names = list(a)
        x, y = lw.value(a[names[0]]), lw.value(a[names[1]])
        out = _dtype(node)
        kinds = [v.dtype for v in (x, y) if isinstance(v, Val)]
        compute = out
        if compare:
            # torch's promotion: a float operand, a python float included,
            # makes the comparison a float one.
            compute = next((k for k in kinds if k in FLOATS), None) or \
                ("f32" if any(isinstance(v, float) for v in (x, y)) or not kinds else kinds[0])
        alpha = a.get("alpha", 1)
        operands = [x, y]
        scalars_types = [v.dtype if isinstance(v, Val) else None for v in operands]

        def build(b: Body, s: list[str]) -> str:
            vals = []
            for v, t, operand in zip(s, scalars_types, operands):
                if t is None:  # a python scalar: a constant of the computation's type
                    vals.append(b.const(operand, compute) if not isinstance(operand, bool) or compute == "i1"
                                else b.const(int(operand), compute))
                else:
                    vals.append(b.cast(v, t, compute))
            if alpha != 1:
                vals[1] = b.op(f"arith.mul{'f' if compute in FLOATS else 'i'} {vals[1]}, "
                               f"{b.const(alpha, compute)}", compute)
            return body(b, vals[0], vals[1], compute)
        tensors = [v for v in operands if isinstance(v, Val)]
        if not tensors:
            raise UnsupportedError(node, "no tensor operand")
        return lw.e.elementwise(_shape(node), out, tensors, lambda b, s: build(b, _spread(s, operands)), node.name)
    return handler


def _spread(scalars: list[str], operands) -> list[str]:
    """Block arguments back in operand order; python scalars get a None slot."""
    it = iter(scalars)
    return [next(it) if isinstance(v, Val) else None for v in operands]


def _arith(float_op: str, int_op: str):
    return lambda b, x, y, t: b.op(f"arith.{float_op if t in FLOATS else int_op} {x}, {y}", t)


def _pow(lw: Lowering, node, a):
    x = lw.tensor(a["self"])
    exponent = a["exponent"]
    dtype = _dtype(node)
    if isinstance(exponent, torch.fx.Node):
        raise UnsupportedError(node, "a tensor exponent")

    def body(b: Body, s):
        v = b.cast(s[0], x.dtype, dtype)
        if float(exponent).is_integer() and abs(exponent) <= 8:
            k = int(abs(exponent))
            if k == 0:
                return b.const(1.0, dtype)
            result = v
            for _ in range(k - 1):
                result = b.op(f"arith.mulf {result}, {v}", dtype)
            if exponent < 0:
                result = b.op(f"arith.divf {b.const(1.0, dtype)}, {result}", dtype)
            return result
        if exponent == 0.5:
            return b.op(f"math.sqrt {v}", dtype)
        if exponent == -0.5:
            return b.op(f"math.rsqrt {v}", dtype)
        return b.op(f"math.powf {v}, {b.const(exponent, dtype)}", dtype)
    return lw.e.elementwise(_shape(node), dtype, [x], body, node.name)


def _silu(b: Body, x: str, t: str) -> str:
    e = b.op(f"math.exp {b.op(f'arith.negf {x}', t)}", t)
    return b.op(f"arith.divf {x}, {b.op(f'arith.addf {b.const(1.0, t)}, {e}', t)}", t)


def _sigmoid(b: Body, x: str, t: str) -> str:
    e = b.op(f"math.exp {b.op(f'arith.negf {x}', t)}", t)
    return b.op(f"arith.divf {b.const(1.0, t)}, {b.op(f'arith.addf {b.const(1.0, t)}, {e}', t)}", t)


def _gelu(lw: Lowering, node, a):
    x = lw.tensor(a["self"])
    approximate = a.get("approximate", "none")
    dtype = _dtype(node)

    def body(b: Body, s):
        v = s[0]
        half = b.op(f"arith.mulf {v}, {b.const(0.5, dtype)}", dtype)
        if approximate == "tanh":
            cube = b.op(f"arith.mulf {b.op(f'arith.mulf {v}, {v}', dtype)}, {v}", dtype)
            inner = b.op(f"arith.addf {v}, {b.op(f'arith.mulf {cube}, {b.const(0.044715, dtype)}', dtype)}", dtype)
            scaled = b.op(f"arith.mulf {inner}, {b.const(math.sqrt(2.0 / math.pi), dtype)}", dtype)
            core = b.op(f"math.tanh {scaled}", dtype)
        elif approximate == "none":
            core = b.op(f"math.erf {b.op(f'arith.mulf {v}, {b.const(1.0 / math.sqrt(2.0), dtype)}', dtype)}", dtype)
        else:
            raise UnsupportedError(node, f"gelu approximation '{approximate}'")
        return b.op(f"arith.mulf {half}, {b.op(f'arith.addf {core}, {b.const(1.0, dtype)}', dtype)}", dtype)
    return lw.e.elementwise(_shape(node), dtype, [x], body, node.name)


def _where(lw: Lowering, node, a):
    cond, x, y = lw.value(a["condition"]), lw.value(a["self"]), lw.value(a["other"])
    dtype = _dtype(node)
    operands = [cond, x, y]

    def body(b: Body, s):
        s = _spread(s, operands)
        vals = []
        for v, operand, want in zip(s, operands, ("i1", dtype, dtype)):
            if v is None:
                vals.append(b.const(operand, want))
            else:
                vals.append(b.cast(v, operand.dtype, want))
        return b.op(f"arith.select {vals[0]}, {vals[1]}, {vals[2]}", dtype)
    return lw.e.elementwise(_shape(node), dtype, [v for v in operands if isinstance(v, Val)], body, node.name)


def _reduce(lw: Lowering, node, a):
    x = lw.tensor(a["self"])
    dims = a.get("dim")
    dims = list(range(x.rank)) if dims in (None, []) else [d % x.rank for d in dims]
    dtype = _dtype(node)
    if dtype not in FLOATS:
        raise UnsupportedError(node, "an integer reduction")
    total = lw.e.reduce_sum(x, dims, dtype, node.name + "_s")
    if _op_name(node).startswith("aten.mean"):
        count = math.prod(x.shape[d] for d in dims)
        total = lw.e.elementwise(total.shape, dtype, [total],
                                 lambda b, s: b.op(f"arith.divf {s[0]}, {b.const(float(count), dtype)}", dtype),
                                 node.name + "_m")
    return lw.e.reshape(total, _shape(node), node.name)


def _embedding(lw: Lowering, node, a):
    weight, ids = lw.tensor(a["weight"]), lw.tensor(a["indices"])
    if a.get("padding_idx", -1) not in (-1, None) or a.get("sparse"):
        raise UnsupportedError(node, "embedding with padding_idx or sparse gradients")
    weight = lw.e.materialize(weight, node.name + "_w")
    ids = lw.e.materialize(ids, node.name + "_i")
    shape = _shape(node)
    name = lw.e.fresh(node.name)
    out = Val(name, shape, weight.dtype)
    lw.e.emit(f"{name} = train.embedding {weight.name}[{ids.name}] : {weight.type}, {ids.type} -> {out.type}")
    return out


def _linear(lw: Lowering, node, a):
    x, w = lw.tensor(a["input"]), lw.tensor(a["weight"])
    bias = a.get("bias")
    shape = _shape(node)
    rows = math.prod(shape[:-1])
    x2 = lw.e.reshape(x, (rows, x.shape[-1]), node.name + "_x")
    if w.perm is not None:
        w = lw.e.materialize(w, node.name + "_w")
    y = lw.e.matmul(x2, w.permuted((1, 0)), node.name + "_mm")
    if bias is not None:
        y = _add_bias(lw, node, y, lw.tensor(bias))
    return lw.e.reshape(y, shape, node.name)


def _add_bias(lw: Lowering, node, y: Val, bias: Val, scale: float = 1.0) -> Val:
    def body(b: Body, s):
        v = s[1] if scale == 1.0 else b.op(f"arith.mulf {s[1]}, {b.const(scale, y.dtype)}", y.dtype)
        return b.op(f"arith.addf {s[0]}, {v}", y.dtype)
    return lw.e.elementwise(y.shape, y.dtype, [y, bias], body, node.name + "_bias")


def _two_d(lw: Lowering, v: Val, hint: str) -> Val:
    return v if v.perm in (None, (1, 0)) else lw.e.materialize(v, hint)


def _mm(lw: Lowering, node, a):
    x, y = _two_d(lw, lw.tensor(a["self"]), node.name + "_a"), _two_d(lw, lw.tensor(a["mat2"]), node.name + "_b")
    return lw.e.matmul(x, y, node.name)


def _addmm(lw: Lowering, node, a):
    if a.get("beta", 1) != 1 or a.get("alpha", 1) != 1:
        raise UnsupportedError(node, "addmm with beta or alpha other than 1")
    x, y = _two_d(lw, lw.tensor(a["mat1"]), node.name + "_a"), _two_d(lw, lw.tensor(a["mat2"]), node.name + "_b")
    return _add_bias(lw, node, lw.e.matmul(x, y, node.name + "_mm"), lw.tensor(a["self"]))


def _bmm(lw: Lowering, node, a):
    return lw.e.batch_matmul(lw.tensor(a["self"]), lw.tensor(a["mat2"]), node.name)


def _layer_norm(lw: Lowering, node, a):
    x = lw.tensor(a["input"])
    shape = list(a["normalized_shape"])
    if len(shape) != 1:
        raise UnsupportedError(node, f"layer_norm over {len(shape)} dims (only the last one is supported)")
    dtype, n = x.dtype, shape[0]
    eps = a.get("eps", 1e-5)
    keep = x.shape[:-1] + (1,)
    mean = lw.e.reshape(_reduce_mean(lw, x, node.name + "_mean"), keep, node.name + "_mk")
    centred = lw.e.elementwise(x.shape, dtype, [x, mean], lambda b, s: b.op(f"arith.subf {s[0]}, {s[1]}", dtype),
                               node.name + "_c")
    square = lw.e.elementwise(x.shape, dtype, [centred], lambda b, s: b.op(f"arith.mulf {s[0]}, {s[0]}", dtype),
                              node.name + "_sq")
    var = lw.e.reshape(_reduce_mean(lw, square, node.name + "_var"), keep, node.name + "_vk")
    rstd = lw.e.elementwise(keep, dtype, [var], lambda b, s: b.op(
        f"math.rsqrt {b.op(f'arith.addf {s[0]}, {b.const(eps, dtype)}', dtype)}", dtype), node.name + "_rstd")
    operands = [centred, rstd]
    weight, bias = a.get("weight"), a.get("bias")
    if weight is not None:
        operands.append(lw.tensor(weight))
    if bias is not None:
        operands.append(lw.tensor(bias))

    def body(b: Body, s):
        y = b.op(f"arith.mulf {s[0]}, {s[1]}", dtype)
        k = 2
        if weight is not None:
            y = b.op(f"arith.mulf {y}, {s[k]}", dtype)
            k += 1
        if bias is not None:
            y = b.op(f"arith.addf {y}, {s[k]}", dtype)
        return y
    del n
    return lw.e.elementwise(x.shape, dtype, operands, body, node.name)


def _reduce_mean(lw: Lowering, x: Val, hint: str) -> Val:
    total = lw.e.reduce_sum(x, [x.rank - 1], x.dtype, hint + "_s")
    count = float(x.shape[-1])
    return lw.e.elementwise(total.shape, x.dtype, [total],
                            lambda b, s: b.op(f"arith.divf {s[0]}, {b.const(count, x.dtype)}", x.dtype), hint)


def _attention(lw: Lowering, node, a):
    q = lw.tensor(a["query"])
    if a.get("dropout_p", 0.0):
        raise UnsupportedError(node, f"attention dropout p={a['dropout_p']}: Loom trains without dropout; set the "
                                     "model's attention dropout to 0 (or export it in eval mode)")
    k_node, v_node = a["key"], a["value"]
    k = lw.tensor(lw.kv_source.get(k_node, k_node))
    v = lw.tensor(lw.kv_source.get(v_node, v_node))
    if q.rank != 4 or k.rank != 4:
        raise UnsupportedError(node, f"attention on rank-{q.rank} operands (only [batch, heads, seq, head_dim])")
    b, h, s, d = q.shape
    hkv = k.shape[1]
    if k.shape != (b, hkv, s, d) or v.shape != k.shape or h % hkv:
        raise UnsupportedError(node, f"attention shapes q {q.shape}, k {k.shape}, v {v.shape}: Loom's attention "
                                     "takes self-attention with kv heads dividing the query heads")
    causal = bool(a.get("is_causal", False))
    mask = a.get("attn_mask")
    if mask is not None:
        if causal:
            raise UnsupportedError(node, "both a mask and is_causal")
        if mask not in lw.const:
            raise UnsupportedError(node, "an attention mask computed from the inputs (a padding mask?): Loom's "
                                         "attention takes a causal or a full mask known at import time")
        causal = _mask_kind(node, lw.const[mask], b, h, s)
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    layout = (0, 2, 1, 3)  # [b, h, s, d] seen from [b, s, h, d]
    qs, ks, vs = (lw.e.materialize(x.permuted(layout), node.name + "_" + tag) for x, tag in
                  ((q, "q"), (k, "k"), (v, "v")))
    name = lw.e.fresh(node.name)
    out = Val(name, qs.phys, q.dtype)
    lw.e.emit(f"{name} = train.attention {qs.name}, {ks.name}, {vs.name}{' causal' if causal else ''} "
              f"scale = {float_literal(float(scale), 'f64')} : {qs.type}, {ks.type}")
    return out.permuted(layout)


def _mask_kind(node, mask: torch.Tensor, b: int, h: int, s: int) -> bool:
    """True for a causal mask, False for a full one; anything else is refused."""
    try:
        mask = mask.expand(b, h, s, s)
    except RuntimeError as error:
        raise UnsupportedError(node, f"an attention mask of shape {tuple(mask.shape)}") from error
    allowed = mask if mask.dtype == torch.bool else (mask == 0)
    if mask.dtype != torch.bool and not bool(((mask == 0) | (mask <= -1e30)).all()):
        raise UnsupportedError(node, "an additive attention mask with values other than 0 and -inf (a bias?)")
    causal = torch.ones(s, s, dtype=torch.bool).tril()
    if bool((allowed == causal).all()):
        return True
    if bool(allowed.all()):
        return False
    raise UnsupportedError(node, "an attention mask that is neither causal nor full (a padding or sliding-window "
                                 "mask?): Loom's attention takes only those two")


def _cross_entropy(lw: Lowering, node, a):
    logits, labels = lw.tensor(a["self"]), lw.tensor(a["target"])
    if a.get("weight") is not None:
        raise UnsupportedError(node, "cross-entropy with class weights")
    reduction = {1: "mean", 2: "sum"}.get(a.get("reduction", 1))
    if reduction is None:
        raise UnsupportedError(node, "cross-entropy with reduction='none'")
    if logits.rank != 2 or labels.rank != 1:
        raise UnsupportedError(node, f"cross-entropy of {logits.shape} logits: flatten them to [tokens, vocab] "
                                     "and the labels to [tokens]")
    if labels.dtype != "i32":
        raise UnsupportedError(node, "cross-entropy with probability targets")
    logits, labels = lw.e.materialize(logits, node.name + "_l"), lw.e.materialize(labels, node.name + "_t")
    name = lw.e.fresh(node.name)
    ignore = a.get("ignore_index", -100)
    smoothing = float(a.get("label_smoothing", 0.0))
    lw.e.emit(f"{name} = train.cross_entropy {logits.name}, {labels.name} ignore_index = {ignore} "
              f"reduction = <{reduction}> label_smoothing = {float_literal(smoothing, 'f64')} z_loss = 0.0 : "
              f"{logits.type}, {labels.type} -> tensor<{_dtype(node)}>")
    return Val(name, (), _dtype(node))


_CMP = {"eq": ("oeq", "eq"), "ne": ("une", "ne"), "lt": ("olt", "slt"), "le": ("ole", "sle"),
        "gt": ("ogt", "sgt"), "ge": ("oge", "sge")}


def _comparison(kind: str):
    fp, ip = _CMP[kind]

    def body(b: Body, x, y, t):
        return b.typed(f"arith.cmpf {fp}, {x}, {y} : {t}" if t in FLOATS else f"arith.cmpi {ip}, {x}, {y} : {t}")
    return _binary(body, compare=True)


_HANDLERS: dict[str, Callable] = {
    **{name: _identity for name in _IDENTITY},
    **{name: _reshape for name in _RESHAPES},
    "aten._to_copy.default": _to_copy,
    "aten.permute.default": _permute, "aten.transpose.int": _permute, "aten.t.default": _permute,
    "aten.expand.default": _expand,
    "aten.slice.Tensor": _slice, "aten.select.int": _select,
    "aten.split.Tensor": _split, "aten.split_with_sizes.default": _split,
    "aten.cat.default": _cat,
    "aten.add.Tensor": _binary(_arith("addf", "addi")), "aten.sub.Tensor": _binary(_arith("subf", "subi")),
    "aten.mul.Tensor": _binary(_arith("mulf", "muli")), "aten.div.Tensor": _binary(_arith("divf", "divsi")),
    "aten.add.Scalar": _binary(_arith("addf", "addi")), "aten.sub.Scalar": _binary(_arith("subf", "subi")),
    "aten.mul.Scalar": _binary(_arith("mulf", "muli")), "aten.div.Scalar": _binary(_arith("divf", "divsi")),
    "aten.maximum.default": _binary(_arith("maximumf", "maxsi")),
    "aten.minimum.default": _binary(_arith("minimumf", "minsi")),
    "aten.bitwise_and.Tensor": _binary(_arith("andi", "andi")),
    **{f"aten.{k}.{kind}": _comparison(k) for k in _CMP for kind in ("Tensor", "Scalar")},
    "aten.neg.default": _unary(lambda b, x, t: b.op(f"arith.negf {x}" if t in FLOATS else
                                                    f"arith.subi {b.const(0, t)}, {x}", t)),
    "aten.exp.default": _unary(lambda b, x, t: b.op(f"math.exp {x}", t)),
    "aten.log.default": _unary(lambda b, x, t: b.op(f"math.log {x}", t)),
    "aten.sqrt.default": _unary(lambda b, x, t: b.op(f"math.sqrt {x}", t)),
    "aten.rsqrt.default": _unary(lambda b, x, t: b.op(f"math.rsqrt {x}", t)),
    "aten.tanh.default": _unary(lambda b, x, t: b.op(f"math.tanh {x}", t)),
    "aten.sin.default": _unary(lambda b, x, t: b.op(f"math.sin {x}", t)),
    "aten.cos.default": _unary(lambda b, x, t: b.op(f"math.cos {x}", t)),
    "aten.abs.default": _unary(lambda b, x, t: b.op(f"math.absf {x}", t)),
    "aten.erf.default": _unary(lambda b, x, t: b.op(f"math.erf {x}", t)),
    "aten.reciprocal.default": _unary(lambda b, x, t: b.op(f"arith.divf {b.const(1.0, t)}, {x}", t)),
    "aten.relu.default": _unary(lambda b, x, t: b.op(f"arith.maximumf {x}, {b.const(0.0, t)}", t)),
    "aten.silu.default": _unary(_silu), "aten.sigmoid.default": _unary(_sigmoid),
    "aten.gelu.default": _gelu, "aten.pow.Tensor_Scalar": _pow,
    "aten.where.self": _where,
    "aten.mean.dim": _reduce, "aten.sum.dim_IntList": _reduce, "aten.mean.default": _reduce,
    "aten.sum.default": _reduce,
    "aten.embedding.default": _embedding, "aten.linear.default": _linear,
    "aten.mm.default": _mm, "aten.addmm.default": _addmm, "aten.bmm.default": _bmm,
    "aten.layer_norm.default": _layer_norm,
    "aten.scaled_dot_product_attention.default": _attention,
    "aten.cross_entropy_loss.default": _cross_entropy,
}

_REFUSED = {
    "aten._softmax.default": "a softmax outside attention and the loss needs a max-reduction Loom cannot "
                             "differentiate: use attn_implementation='sdpa' (scaled_dot_product_attention)",
    "aten._log_softmax.default": "a log-softmax outside cross_entropy: compute the loss with "
                                 "torch.nn.functional.cross_entropy",
    "aten.nll_loss_forward.default": "nll_loss on a log-softmax: compute the loss with "
                                     "torch.nn.functional.cross_entropy",
    "aten.index.Tensor": "a gather by computed indices (use an embedding for lookups)",
    "aten.sym_size.int": "a dynamic size: export with static shapes",
}
