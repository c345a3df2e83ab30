"""Compile a forward into a trainer, and report on a step, in-process.

:func:`compile` runs Loom's compiler driver (``lib/Driver``, the library
``loomc`` is a client of) through the extension module ``loom._loom``: the
same phases and the same options as ``loomc``, named as its flags are
(``world_size=2`` is ``--world-size=2``), without a subprocess. A compile
that fails raises :class:`CompileError` carrying the diagnostics.

Example::

    import loom
    from loom.models.llama import LlamaConfig, build_forward

    forward = build_forward(LlamaConfig.tiny())
    trainer = loom.compile(forward, output="trainer", world_size=2, zero_stage=3)
    print(trainer.path, trainer.plans[0]["peak_bytes"])
    step = loom.compile(forward, emit="step", world_size=2, zero_stage=3).text
    print(loom.report(step, device="h100-nvlink")["peak_bytes"])
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional


class CompileError(RuntimeError):
    """Loom's compiler rejected its input or options; ``diagnostics`` holds
    what it reported (the same text ``loomc`` prints)."""

    def __init__(self, diagnostics: str) -> None:
        super().__init__(diagnostics.rstrip() or "the compile failed")
        self.diagnostics = diagnostics


@dataclass
class Compiled:
    """What a compile produced.

    ``text``: the module at an intermediate ``emit`` point (``training-step``,
    ``step``, ``memory-plan``, ``mlir``, ``llvm-mlir``), the kernels' PTX or
    LLVM IR; ``path``: the trainer (``emit="exe"``, the default) or object
    written to ``output``; ``plans``: each pipeline stage's memory plan
    (``peak_bytes``, ``arena_bytes``, ``arena_bound_bytes``; one entry
    without stages) once the memory-plan phase ran; ``manifests``: the
    lowered step's manifest per stage (its ``properties`` and ``tensors``:
    role, name, dtype, local and full shape).
    """

    text: str | None = None
    path: str | None = None
    plans: list[dict[str, int]] = field(default_factory=list)
    manifests: list[dict[str, Any]] = field(default_factory=list)


def _extension():
    try:
        from loom import _loom
    except ImportError as error:
        raise ImportError(
            "loom._loom (the compiler driver's extension) is not built: run "
            "./scripts/test or build the LoomPythonModule target, or set "
            f"LOOM_PYTHON_EXT_DIR ({error})") from None
    return _loom


def _flag(name: str, value: Any) -> str:
    flag = "--" + name.replace("_", "-")
    if value is True:
        return flag
    if value is False:
        return flag + "=false"
    if isinstance(value, (list, tuple)):
        return flag + "=" + ",".join(map(str, value))
    return f"{flag}={value}"


def compile(module: str | os.PathLike, output: str | os.PathLike | None = None, *,  # noqa: A001
            name: str = "forward.mlir", **options: Any) -> Compiled:
    """Compiles ``module`` (a forward's IR text, or a path to it) with ``loomc``'s ``options``
    (keyword names are its flags with ``_`` for ``-``: ``emit``,
    ``target``, ``world_size``, ``zero_stage``, ``pipeline_stages``,
    ``remat_budget_mb``, ...) and returns :class:`Compiled`. ``output`` is
    where ``emit="exe"`` (the default) or ``"obj"`` writes; ``name`` is the
    source's name in diagnostics and in the trainer's log."""
    if isinstance(module, os.PathLike):
        name = os.path.basename(module)
        with open(module, encoding="utf-8") as source:
            module = source.read()
    flags = [_flag(key, value) for key, value in options.items() if value is not None]
    ok, result = _extension().compile(module, flags, os.fspath(output) if output else "", name)
    if not ok:
        raise CompileError(result)
    return Compiled(text=result["text"], path=result["path"], plans=list(result["plans"]),
                    manifests=list(result["manifests"]))


def report(step: str, device: Optional[str] = None, *, profile: Optional[str] = None,
           name: str = "step.mlir", **options: Any) -> Any:
    """Runs ``coll-report`` on ``step`` (a sharded step, e.g.
    ``compile(..., emit="step").text``) in-process and returns its JSON
    report as Python objects: the schedule's simulated time, the memory
    timeline's peak, compute, communication and stalls (see docs/Passes.md,
    coll-report), the target it used under ``target``, and under ``table``
    the table coll-report prints. The step is simulated on the target it
    carries (``train.target``, set when it was compiled) unless ``device``
    (and ``profile``, a trainer's --profile) names another: then
    ``loom-set-target`` runs first. Further ``options`` are coll-report's
    (``function="..."``)."""
    if profile and not device:
        raise ValueError("loom.report: a profile needs the device it was measured on (device=...)")
    extra = " ".join(f"{key.replace('_', '-')}={value}" for key, value in options.items())
    ok, result = _extension().report(step, name, device or "", profile or "", extra)
    if not ok:
        raise CompileError(result)
    text, table = result
    report = json.loads(text)
    report["table"] = table
    return report
