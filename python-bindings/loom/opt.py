"""Run ``loom-opt`` on IR text from Python.

``run_opt`` pipes IR through ``loom-opt`` with the given pass arguments and
returns the printed result; diagnostics become a :class:`LoomOptError` that
carries them, so callers never mistake broken IR for output.

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
    """``loom-opt`` rejected its input or failed; ``diagnostics`` holds stderr."""

    def __init__(self, returncode: int, diagnostics: str) -> None:
        super().__init__(f"loom-opt exited with status {returncode}:\n{diagnostics}")
        self.returncode = returncode
        self.diagnostics = diagnostics


def find_loom_opt() -> str:
    """Locates ``loom-opt``: ``$LOOM_OPT``, then ``PATH``, then the source tree's
    ``build/bin``."""
    explicit = os.environ.get("LOOM_OPT")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise FileNotFoundError(f"LOOM_OPT={explicit} is not an executable")
        return explicit
    on_path = shutil.which("loom-opt")
    if on_path:
        return on_path
    in_tree = Path(__file__).resolve().parents[2] / "build" / "bin" / "loom-opt"
    if os.access(in_tree, os.X_OK):
        return str(in_tree)
    raise FileNotFoundError(
        "loom-opt not found: set LOOM_OPT, put it on PATH, or build it with ./scripts/test"
    )


def run_opt(source: str, args: Sequence[str] = (), timeout_s: float = 600.0) -> str:
    """Runs ``loom-opt`` with ``args`` on ``source`` and returns its output."""
    proc = subprocess.run(
        [find_loom_opt(), *args, "-"],
        input=source,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        raise LoomOptError(proc.returncode, proc.stderr)
    return proc.stdout
