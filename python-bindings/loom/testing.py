"""Evaluate Loom IR on NumPy arrays, for numerical tests.

:func:`run_function` hands a module to ``loom-run``, the reference evaluator
(train ops decomposed, linalg lowered to loops, JIT-compiled), and returns the
function's results as arrays. Tests compare them with NumPy or PyTorch
references and with finite differences.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Sequence

import numpy as np

from loom.opt import LoomOptError, find_tool

_SUPPORTED = {np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64)}


def run_function(
    source: str, entry: str, args: Sequence[np.ndarray], timeout_s: float = 600.0
) -> list[np.ndarray]:
    """Calls ``entry`` in the module ``source`` on ``args``; returns its results."""
    with tempfile.TemporaryDirectory(prefix="loom-run-") as tmp:
        module_path = os.path.join(tmp, "module.mlir")
        with open(module_path, "w") as f:
            f.write(source)
        arg_paths = []
        for index, arg in enumerate(args):
            array = np.ascontiguousarray(arg)
            if array.dtype not in _SUPPORTED:
                raise TypeError(f"argument #{index} has dtype {array.dtype}; use f32, f64, i32 or i64")
            path = os.path.join(tmp, f"arg{index}.npy")
            np.save(path, array)
            arg_paths.append(path)
        out_dir = os.path.join(tmp, "out")
        proc = subprocess.run(
            [find_tool("loom-run"), module_path, f"--entry={entry}", f"--output-dir={out_dir}", *arg_paths],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if proc.returncode != 0:
            raise LoomOptError("loom-run", proc.returncode, proc.stderr)
        results = []
        index = 0
        while os.path.exists(os.path.join(out_dir, f"result{index}.npy")):
            results.append(np.load(os.path.join(out_dir, f"result{index}.npy")))
            index += 1
        return results
