"""PyTorch models in, through ``torch.export`` (see docs/Import.md).

    import loom.frontend.torch as lt
    model = lt.causal_lm_loss(LlamaForCausalLM(config))   # (tokens, labels) -> loss
    imported = lt.import_module(model, (tokens, labels))
    imported.text                                          # Loom forward IR
    imported.write_init(model, "init-ckpt")                # the module's own weights

The module's forward takes the example batch's tensors and returns the
scalar training loss. Its parameters become ``train.param`` arguments under
their fully qualified names (the state_dict's and the safetensors keys;
:func:`causal_lm_loss`'s wrapper prefix is dropped), tied parameters one
argument under the first name; integer inputs become ``i32`` ``train.input``
arguments named like the forward's arguments (the trainer feeds ``tokens``
and ``labels``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Mapping, Sequence

import torch

from loom.frontend._lowering import Lowering, UnsupportedError

__all__ = ["CausalLMLoss", "Imported", "UnsupportedError", "causal_lm_loss", "empty_weights", "import_module",
           "import_program"]

# Ops kept whole through decomposition: each maps onto a Loom op or a
# lowering that keeps its structure (attention and the loss especially).
KEPT = ("scaled_dot_product_attention.default", "linear.default", "cross_entropy_loss.default",
        "silu.default", "embedding.default", "layer_norm.default", "gelu.default")


class CausalLMLoss(torch.nn.Module):
    """A causal LM's mean next-token cross-entropy: ``forward(tokens, labels)``
    with labels already shifted (the trainer's labels are the next tokens),
    ``ignore_index`` as PyTorch's cross-entropy has it."""

    loom_prefix = "model."

    def __init__(self, model: torch.nn.Module, ignore_index: int = -100):
        super().__init__()
        self.model = model
        self.ignore_index = ignore_index

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = self.model(input_ids=tokens, use_cache=False).logits
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                 ignore_index=self.ignore_index)


@contextlib.contextmanager
def empty_weights():
    """Modules built inside have their parameters on the meta device (no
    memory) and their buffers real, as accelerate's ``init_empty_weights``
    does: enough to import a model of any size. The importer never reads a
    parameter's values; it exports such a module on the meta device and
    folds constants (RoPE's ``inv_freq``, the causal mask) on the CPU from
    the real buffers::

        with loom.frontend.torch.empty_weights():
            model = causal_lm_loss(LlamaForCausalLM(llama3_8b_config))
        text = import_module(model, batch).text
    """
    register = torch.nn.Module.register_parameter

    def on_meta(module, name, param):
        register(module, name, param)
        if param is not None:
            kind = type(module._parameters[name])
            module._parameters[name] = kind(module._parameters[name].to("meta"),
                                            requires_grad=param.requires_grad)

    torch.nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def causal_lm_loss(model: torch.nn.Module, ignore_index: int = -100) -> CausalLMLoss:
    """Wraps a Hugging Face causal LM (anything whose forward takes
    ``input_ids`` and returns ``.logits``) into the importer's form."""
    return CausalLMLoss(model, ignore_index)


@dataclasses.dataclass
class Imported:
    """An imported forward: its IR text and how its arguments map back."""

    text: str
    parameters: list[tuple[str, tuple[int, ...]]]   # argument order
    tied: dict[str, str]                            # alias -> the name that holds it
    inputs: list[str]
    prefix: str = ""
    # Patterns mapped onto train ops (rms_norm, rope: how many), and the
    # remarks on those left elementwise (same math, slower).
    matched: dict[str, int] = dataclasses.field(default_factory=dict)
    remarks: list[str] = dataclasses.field(default_factory=list)

    def state_dict(self, module: torch.nn.Module) -> dict[str, torch.Tensor]:
        """The module's tensors for this forward's parameters, by Loom name."""
        own = dict(module.named_parameters(remove_duplicate=False))
        own.update(dict(module.named_buffers(remove_duplicate=False)))
        out = {}
        for name, shape in self.parameters:
            tensor = own.get(self.prefix + name)
            if tensor is None:
                raise KeyError(f"the module has no tensor '{self.prefix + name}'")
            if tuple(tensor.shape) != shape:
                raise ValueError(f"'{name}' is {tuple(tensor.shape)} in the module, {shape} in the forward")
            out[name] = tensor.detach()
        return out

    def write_init(self, module: torch.nn.Module, root: str | os.PathLike) -> str:
        """A Loom checkpoint (step 0) of the module's own weights, for the
        trainer's ``--init``. Returns the step directory."""
        from loom.checkpoint import from_state_dict
        weights = self.state_dict(module)
        empty = [name for name, tensor in weights.items() if tensor.device.type == "meta"]
        if empty:
            raise ValueError(f"'{empty[0]}' (and {len(empty) - 1} more) hold no values (built under "
                             "empty_weights): there are no weights to write")
        return from_state_dict(weights, os.fspath(root))


def import_program(program: torch.export.ExportedProgram, *, prefix: str = "") -> str:
    """Loom forward IR (text) for an exported program whose output is the
    scalar loss. ``prefix`` is dropped from parameter names."""
    return _lower(program, prefix).text


def import_module(module: torch.nn.Module, example_batch: Sequence[torch.Tensor] | torch.Tensor,
                  *, prefix: str | None = None) -> Imported:
    """Exports ``module`` with the static shapes of ``example_batch`` and
    imports it. Raises :class:`UnsupportedError` naming the op, the FX node
    and the source line of anything it cannot lower."""
    batch = (example_batch,) if isinstance(example_batch, torch.Tensor) else tuple(example_batch)
    # Each input its own tensor: torch.export merges inputs that are one
    # object, `(zeros,) * 2` included, and the graph then reads one for both.
    batch = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in batch)
    if prefix is None:
        prefix = getattr(module, "loom_prefix", "")
    if not any(p.device.type == "meta" for p in module.parameters()):
        return _lower(export(module, batch), prefix)
    # Parameters without memory (empty_weights): export on the meta device,
    # fold on the CPU from the buffers as they were.
    buffers = {name: b.detach().clone() for name, b in module.named_buffers(remove_duplicate=False)}
    module.to("meta")
    try:
        program = export(module, tuple(t.to("meta") if isinstance(t, torch.Tensor) else t for t in batch))
    finally:
        with torch.no_grad():
            for name, value in buffers.items():
                owner, _, leaf = name.rpartition(".")
                target = module.get_submodule(owner) if owner else module
                target._buffers[leaf] = value
    return _lower(program, prefix, buffers)


def export(module: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.export.ExportedProgram:
    """``torch.export`` with static shapes, decomposed to core ATen except
    for the ops in :data:`KEPT`."""
    program = torch.export.export(module, batch)
    table = torch.export.default_decompositions()
    for name in KEPT:
        packet, overload = name.split(".")
        table.pop(getattr(getattr(torch.ops.aten, packet), overload), None)
    return program.run_decompositions(table)


def _lower(program: torch.export.ExportedProgram, prefix: str,
           buffers: Mapping[str, torch.Tensor] | None = None) -> Imported:
    signature = program.graph_signature
    tensors = program.state_dict
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    # Tied parameters: one storage under several names -> the first name.
    canonical: dict[int, str] = {}
    param_names, tied = {}, {}
    for spec in signature.input_specs:
        if spec.kind.name != "PARAMETER":
            continue
        tensor = tensors[spec.target]
        key = _storage_key(tensor)
        name = _strip(spec.target, prefix)
        holder = canonical.setdefault(key, name)
        if holder != name:
            tied[name] = holder
        param_names[spec.arg.name] = holder
    inputs = {spec.arg.name: spec.arg.name for spec in signature.input_specs if spec.kind.name == "USER_INPUT"}
    lowering = Lowering(program, param_names, inputs, buffers or {})
    text = lowering.run()
    parameters = []
    for arg, node in placeholders.items():
        if arg in param_names and param_names[arg] not in dict(parameters) and node in lowering.vals:
            parameters.append((param_names[arg], tuple(node.meta["val"].shape)))
    return Imported(text=text, parameters=parameters, tied=tied, inputs=list(inputs), prefix=prefix,
                    matched=dict(lowering.matched), remarks=list(lowering.remarks))


def _storage_key(tensor: torch.Tensor) -> int:
    if tensor.device.type == "meta":
        return id(tensor)
    return tensor.untyped_storage().data_ptr() ^ (tensor.storage_offset() << 48)


def _strip(name: str, prefix: str) -> str:
    return name[len(prefix):] if prefix and name.startswith(prefix) else name
