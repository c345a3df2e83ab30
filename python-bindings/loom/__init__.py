"""Loom: an MLIR-based ahead-of-time compiler for distributed training.

The Python package is the front door for people who build models and read
reports. Today it drives the ``loom-opt`` tool (:mod:`loom.opt`); the model
builder, compile driver and report readers join it as the compiler grows.
"""

from loom.opt import LoomOptError, find_loom_opt, find_tool, run_opt

__all__ = ["LoomOptError", "find_loom_opt", "find_tool", "run_opt"]
__version__ = "0.1.0"
