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
    rows = trainer.run(data="corpus.bin", steps=20, checkpoint="ckpt")
    print(rows[-1]["loss"], trainer.state_dict()["embed"].shape)
    step = loom.compile(forward, emit="step", world_size=2, zero_stage=3).text
    print(loom.report(step, device="h100-nvlink")["peak_bytes"])
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence


class TrainerError(RuntimeError):
    """A trainer run ended with an error; ``output`` holds what it printed."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = output


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
    checkpoint: str | None = None
    # For a compiled nn.Module: its weights as a Loom checkpoint (what run()
    # starts from) and the importer's record of its parameters.
    init: str | None = None
    imported: Any = None

    def world_size(self) -> int:
        """The ranks the trainer was compiled for (every stage's replicas)."""
        if not self.manifests:
            raise ValueError("no manifest: compile with emit=\"exe\" or \"obj\"")
        return int(self.manifests[0]["properties"]["world_size"])

    def run(self, data: str | os.PathLike, steps: int = 10, *, ranks: int | None = None,
            checkpoint: str | os.PathLike | None = None, resume: bool = False,
            init: str | os.PathLike | None = None, args: Sequence[str] = (),
            mpirun: Sequence[str] = ("mpirun",), env: dict[str, str] | None = None,
            timeout_s: float | None = None) -> list[dict[str, Any]]:
        """Runs the trainer for ``steps`` steps on ``data`` (a token file,
        docs/Data.md) and returns its log, one dict per step (``loss``,
        ``tokens_per_s``, the memory lines, ``val_loss`` when evaluated).

        ``ranks`` defaults to the compiled world size; more than one runs
        under ``mpirun -np ranks`` (``mpirun`` names the launcher and its
        flags). ``checkpoint`` is where checkpoints go (``--checkpoint``,
        with ``resume`` to continue one), and :meth:`state_dict` reads the
        last; ``init`` starts from a checkpoint's parameters (``--init``;
        for a compiled ``nn.Module`` its own weights unless ``resume``);
        ``args`` are further trainer flags. A run that fails raises
        :class:`TrainerError` with the trainer's output; ``timeout_s`` only
        guards against a hang."""
        if not self.path:
            raise ValueError("this compile wrote no trainer (emit=\"exe\" writes one)")
        ranks = self.world_size() if ranks is None else ranks
        with tempfile.TemporaryDirectory(prefix="loom-run-") as tmp:
            log = os.path.join(tmp, "log.jsonl")
            cmd = [self.path, "--data", os.fspath(data), "--steps", str(steps), "--log", log]
            if checkpoint is not None:
                cmd += ["--checkpoint", os.fspath(checkpoint)] + (["--resume"] if resume else [])
            if init is None and not resume:
                init = self.init
            if init is not None:
                cmd += ["--init", os.fspath(init)]
            cmd += list(args)
            if ranks > 1:
                cmd = [*mpirun, "-np", str(ranks), *cmd]
            # A session of its own, so that a time-out stops every rank,
            # not only the launcher.
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env={**os.environ, **(env or {})},
                                    start_new_session=True)
            try:
                stdout, stderr = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                import signal
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
                raise TrainerError(f"{' '.join(cmd)}: no end after {timeout_s} s (a hang "
                                   "guard)", stdout + stderr) from None
            if proc.returncode != 0:
                out = stdout + stderr
                # The trainer's own message, not the launcher's lines after it.
                lines = [line for line in out.splitlines() if line.strip()]
                said = next((line for line in lines if "trainer: " in line),
                            lines[-1] if lines else "")
                raise TrainerError(f"the trainer exited with {proc.returncode}: {said}", out)
            with open(log, encoding="utf-8") as f:
                rows = [json.loads(line) for line in f if line.strip()]
        if checkpoint is not None:
            self.checkpoint = os.fspath(checkpoint)
        return rows

    def state_dict(self, checkpoint: str | os.PathLike | None = None) -> dict[str, Any]:
        """The parameters of ``checkpoint`` (default: the last :meth:`run`'s)
        by their names, as NumPy arrays at their full shapes: what the
        module's ``load_state_dict`` takes once made tensors
        (``{k: torch.from_numpy(v) for k, v in ...}``). For a compiled
        ``nn.Module`` they are torch tensors under the module's own names,
        tied names included (for :func:`loom.frontend.torch.causal_lm_loss`,
        the wrapped model's names): ``model.load_state_dict(...)`` takes them."""
        from loom.checkpoint import read_checkpoint
        where = checkpoint if checkpoint is not None else self.checkpoint
        if where is None:
            raise ValueError("no checkpoint: run(..., checkpoint=DIR) first, or name one")
        _, params, _ = read_checkpoint(os.fspath(where))
        if self.imported is None:
            return params
        import torch
        out = {name: torch.from_numpy(params[name]) for name, _ in self.imported.parameters}
        for alias, holder in self.imported.tied.items():
            out[alias] = out[holder]
        return out


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


def compile(module: Any, *args: Any, output: str | os.PathLike | None = None,  # noqa: A001
            example_batch: Any = None, name: str = "forward.mlir", **options: Any) -> Compiled:
    """Compiles ``module`` with ``loomc``'s ``options`` (keyword names are
    its flags with ``_`` for ``-``: ``emit``, ``target``, ``world_size``,
    ``zero_stage``, ``pipeline_stages``, ``remat_budget_mb``, ...) and
    returns :class:`Compiled`.

    ``module`` is a forward's IR text or a path to it (then a second
    positional argument is ``output``), or a PyTorch ``nn.Module`` whose
    forward returns the loss (then it is ``example_batch``, one rank's
    batch: the module is imported by :mod:`loom.frontend.torch`, and its
    own weights become the trainer's start, :attr:`Compiled.init`).
    ``output`` is where ``emit="exe"`` (the default) or ``"obj"`` writes;
    ``name`` is the source's name in diagnostics and in the trainer's log."""
    if len(args) > 1:
        raise TypeError(f"loom.compile takes 2 positional arguments, got {1 + len(args)}")
    imported = init = None
    if _is_torch_module(module):
        example_batch = args[0] if args else example_batch
        if example_batch is None:
            raise TypeError("loom.compile of an nn.Module needs its example_batch")
        from loom.frontend.torch import import_module
        torch_module, imported = module, import_module(module, example_batch)
        module, name = imported.text, type(torch_module).__name__ + ".mlir"
        writes_trainer = options.get("emit", "exe") in ("exe", "obj")
        if writes_trainer and any(p.device.type == "meta" for p in torch_module.parameters()):
            import warnings
            warnings.warn("loom.compile: the module's parameters hold no values (empty_weights), so the "
                          "trainer starts from its own initialisation (docs/Runtime.md), not the module's",
                          stacklevel=2)
        elif writes_trainer:
            init = tempfile.mkdtemp(prefix="loom-init-")
            imported.write_init(torch_module, init)
    elif args:
        output = args[0]
    if isinstance(module, os.PathLike):
        name = os.path.basename(module)
        with open(module, encoding="utf-8") as source:
            module = source.read()
    flags = [_flag(key, value) for key, value in options.items() if value is not None]
    ok, result = _extension().compile(module, flags, os.fspath(output) if output else "", name)
    if not ok:
        raise CompileError(result)
    return Compiled(text=result["text"], path=result["path"], plans=list(result["plans"]),
                    manifests=list(result["manifests"]), init=init, imported=imported)


def _is_torch_module(value: Any) -> bool:
    import sys
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


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
