"""Evaluate Loom IR on NumPy arrays, for numerical tests.

:func:`run_function` hands a module to ``loom-run``, the reference evaluator
(train ops decomposed, linalg lowered to loops, JIT-compiled), and returns the
function's results as arrays. Tests compare them with NumPy or PyTorch
references and with finite differences.
"""

from __future__ import annotations

import os
import tempfile
from typing import Sequence

import numpy as np

from loom.opt import run_tool

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
            array = np.asarray(arg, order="C")  # keeps 0-d arrays 0-d
            if array.dtype not in _SUPPORTED:
                raise TypeError(f"argument #{index} has dtype {array.dtype}; use f32, f64, i32 or i64")
            path = os.path.join(tmp, f"arg{index}.npy")
            np.save(path, array)
            arg_paths.append(path)
        out_dir = os.path.join(tmp, "out")
        run_tool("loom-run", [module_path, f"--entry={entry}", f"--output-dir={out_dir}", *arg_paths],
                 timeout_s=timeout_s)
        results = []
        index = 0
        while os.path.exists(os.path.join(out_dir, f"result{index}.npy")):
            results.append(np.load(os.path.join(out_dir, f"result{index}.npy")))
            index += 1
        return results


def directional_gradient_errors(
    forward: str,
    entry: str,
    args: Sequence[np.ndarray],
    param_indices: Sequence[int],
    eps: float = 1e-6,
    seed: int = 0,
) -> list[float]:
    """Checks ``train-autodiff`` on ``forward`` against central differences.

    Differentiates ``forward`` with ``loom-opt --train-autodiff``, evaluates
    the gradients at ``args``, and for each parameter (``param_indices``, in
    argument order) compares the gradient's projection on a random direction
    ``v`` with ``(f(p + eps v) - f(p - eps v)) / (2 eps)``. Returns the
    relative error per parameter. Use f64 arguments: in f32 the difference
    quotient itself is only good to about 1e-3.
    """
    from loom.opt import run_opt

    step = run_opt(forward, ["--train-autodiff"])
    results = run_function(step, entry, args)
    grads = results[-len(param_indices):]
    rng = np.random.default_rng(seed)
    errors = []
    for index, grad in zip(param_indices, grads):
        direction = rng.standard_normal(args[index].shape).astype(args[index].dtype)
        shifted = []
        for sign in (1.0, -1.0):
            moved = list(args)
            moved[index] = args[index] + sign * eps * direction
            shifted.append(float(run_function(forward, entry, moved)[0]))
        numeric = (shifted[0] - shifted[1]) / (2 * eps)
        analytic = float(np.sum(grad * direction))
        scale = max(abs(numeric), abs(analytic), 1e-8)
        errors.append(abs(numeric - analytic) / scale)
    return errors
