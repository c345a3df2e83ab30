"""Loom: an MLIR-based ahead-of-time compiler for distributed training.

The Python package is the front door for people who build models and read
reports: :mod:`loom.models.llama` builds a Llama-style forward from a config,
:mod:`loom.opt` runs Loom's tools (``loom-opt``, ``loomc``, ...) on IR, and
:mod:`loom.memory` returns the static memory plan loomc makes for a forward.
"""

from loom.opt import LoomOptError, find_loom_opt, find_tool, run_opt

__all__ = ["LoomOptError", "find_loom_opt", "find_tool", "run_opt"]
__version__ = "0.1.0"
