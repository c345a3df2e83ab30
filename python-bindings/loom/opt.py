"""Run Loom's passes and tools from Python.

``run_opt`` runs ``loom-opt``'s passes on IR in-process (through the compiler
driver's extension, ``loom._loom``), with the pass arguments ``loom-opt``
takes, and returns the printed result; diagnostics become a
:class:`LoomOptError` that carries them, so callers never mistake broken IR
for output. ``run_tool`` runs one of Loom's other programs (``loom-run``)
as a process.

Example::

    from loom import run_opt
    print(run_opt(source, ["--canonicalize", "--cse"]))
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Sequence


class LoomOptError(RuntimeError):
    """A Loom tool rejected its input or failed; ``diagnostics`` holds stderr."""

    def __init__(self, tool: str, returncode: int, diagnostics: str) -> None:
        super().__init__(f"{tool} exited with status {returncode}:\n{diagnostics}")
        self.returncode = returncode
        self.diagnostics = diagnostics


def find_tool(name: str) -> str:
    """Locates a Loom tool: ``$LOOM_<NAME>`` (e.g. ``LOOM_OPT``), then ``PATH``,
    then the source tree's ``build/bin``."""
    variable = "LOOM_" + name.removeprefix("loom-").upper().replace("-", "_")
    explicit = os.environ.get(variable)
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise FileNotFoundError(f"{variable}={explicit} is not an executable")
        return explicit
    on_path = shutil.which(name)
    if on_path:
        return on_path
    in_tree = Path(__file__).resolve().parents[2] / "build" / "bin" / name
    if os.access(in_tree, os.X_OK):
        return str(in_tree)
    raise FileNotFoundError(
        f"{name} not found: set {variable}, put it on PATH, or build it with ./scripts/test"
    )


def find_loom_opt() -> str:
    """Locates ``loom-opt`` (see :func:`find_tool`)."""
    return find_tool("loom-opt")


def run_tool(name: str, args: Sequence[str], stdin: str | None = None, timeout_s: float = 1800.0) -> str:
    """Runs the Loom tool ``name`` and returns its standard output; a non-zero
    exit raises :class:`LoomOptError` with the tool's diagnostics. The
    time-out only guards against a hang: it is generous, and raises an error
    that says it was a time-out."""
    try:
        proc = subprocess.run(
            [find_tool(name), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        raise LoomOptError(name, -1, f"timed out after {timeout_s:.0f} s (a hang guard, "
                           f"not a speed check): {' '.join(map(str, expired.cmd))}") from None
    if proc.returncode != 0:
        raise LoomOptError(name, proc.returncode, proc.stderr)
    return proc.stdout


def run_opt(source: str, args: Sequence[str] = (), timeout_s: float = 1800.0) -> str:
    """Runs ``loom-opt``'s passes ``args`` (``--name[=options]``,
    ``--pass-pipeline=...``, ``--mlir-print-debuginfo``) on ``source``
    in-process and returns the printed module, as ``loom-opt`` prints it.
    ``timeout_s`` is kept for callers of the former subprocess version and
    unused: a pass runs to its end."""
    del timeout_s
    return run_opt_with_diagnostics(source, args)[0]


def run_opt_with_diagnostics(source: str, args: Sequence[str] = ()) -> tuple[str, str]:
    """As :func:`run_opt`, and the remarks and warnings the passes printed
    (as ``loom-opt`` prints them to stderr)."""
    from loom.compiler import _extension
    ok, result, diagnostics = _extension().opt(source, list(args))
    if not ok:
        raise LoomOptError("loom-opt", 1, result)
    return result, diagnostics
