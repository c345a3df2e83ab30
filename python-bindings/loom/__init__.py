"""Loom: an MLIR-based ahead-of-time compiler for distributed training.

The Python package is the front door for people who build models and read
reports: :mod:`loom.models.llama` builds a Llama-style forward from a config,
:func:`loom.compile` compiles it into a trainer in-process (the compiler
driver's extension, ``loom._loom``) and :func:`loom.report` reports on a
step, :mod:`loom.memory` returns the static memory plan of a forward, and
:mod:`loom.opt` runs Loom's tools (``loom-opt``, ...) on IR.
"""

import os as _os
from pathlib import Path as _Path

# The extension is built into build/python-bindings/loom, beside this
# source tree's pure-Python package (or where LOOM_PYTHON_EXT_DIR says).
for _dir in (_os.environ.get("LOOM_PYTHON_EXT_DIR"),
             str(_Path(__file__).resolve().parents[2] / "build" / "python-bindings" / "loom")):
    if _dir and _os.path.isdir(_dir) and _dir not in __path__:
        __path__.append(_dir)

from loom.compiler import CompileError, Compiled, TrainerError, compile, report  # noqa: E402
from loom.opt import LoomOptError, find_loom_opt, find_tool, run_opt  # noqa: E402

__all__ = ["CompileError", "Compiled", "LoomOptError", "TrainerError", "compile", "find_loom_opt",
           "find_tool", "report", "run_opt"]
__version__ = "0.1.0"
