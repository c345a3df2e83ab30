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


def _save(path: str, arg, index: int) -> None:
    array = np.asarray(arg, order="C")  # keeps 0-d arrays 0-d
    if array.dtype not in _SUPPORTED:
        raise TypeError(f"argument #{index} has dtype {array.dtype}; use f32, f64, i32 or i64")
    np.save(path, array)


def _load_results(directory: str) -> list[np.ndarray]:
    results = []
    while os.path.exists(os.path.join(directory, f"result{len(results)}.npy")):
        results.append(np.load(os.path.join(directory, f"result{len(results)}.npy")))
    return results


def run_function(source: str, entry: str, args: Sequence, ranks: int = 1,
                 timeout_s: float = 1800.0):
    """Calls ``entry`` in the module ``source`` on ``args``; returns its results.

    With ``ranks > 1`` the SPMD program runs on that many simulated ranks
    (threads, with collectives exchanged in memory): an argument may then be
    a list of one array per rank, and the result is one list of results per
    rank.
    """
    with tempfile.TemporaryDirectory(prefix="loom-run-") as tmp:
        module_path = os.path.join(tmp, "module.mlir")
        with open(module_path, "w") as f:
            f.write(source)
        arg_paths = []
        for index, arg in enumerate(args):
            if isinstance(arg, (list, tuple)):
                if len(arg) != ranks:
                    raise ValueError(f"argument #{index} has {len(arg)} per-rank arrays for {ranks} ranks")
                for rank, per_rank in enumerate(arg):
                    _save(os.path.join(tmp, f"arg{index}.rank{rank}.npy"), per_rank, index)
                arg_paths.append(os.path.join(tmp, f"arg{index}.rank{{rank}}.npy"))
            else:
                path = os.path.join(tmp, f"arg{index}.npy")
                _save(path, arg, index)
                arg_paths.append(path)
        out_dir = os.path.join(tmp, "out")
        run_tool("loom-run", [module_path, f"--entry={entry}", f"--output-dir={out_dir}",
                              f"--ranks={ranks}", *arg_paths], timeout_s=timeout_s)
        if ranks == 1:
            return _load_results(out_dir)
        return [_load_results(os.path.join(out_dir, f"rank{r}")) for r in range(ranks)]


def run_stages(source: str, entry: str, args_per_rank: Sequence[Sequence],
               timeout_s: float = 1800.0) -> list[list[np.ndarray]]:
    """Runs a different function on each rank (pipeline stages).

    ``entry`` names rank r's function with ``{rank}`` in it (for
    ``pp-partition``'s stages, ``"forward_stage{rank}"``), and
    ``args_per_rank[r]`` holds its arguments. Transfers between ranks go
    through loom-run's mailboxes. Returns one list of results per rank.
    """
    ranks = len(args_per_rank)
    with tempfile.TemporaryDirectory(prefix="loom-run-") as tmp:
        module_path = os.path.join(tmp, "module.mlir")
        with open(module_path, "w") as f:
            f.write(source)
        for rank, args in enumerate(args_per_rank):
            paths = []
            for index, arg in enumerate(args):
                path = os.path.join(tmp, f"arg{index}.rank{rank}.npy")
                _save(path, arg, index)
                paths.append(path)
            with open(os.path.join(tmp, f"args{rank}.txt"), "w") as f:
                f.write("\n".join(paths) + "\n")
        out_dir = os.path.join(tmp, "out")
        run_tool("loom-run", [module_path, f"--entry={entry}", f"--output-dir={out_dir}",
                              f"--ranks={ranks}", "@" + os.path.join(tmp, "args{rank}.txt")],
                 timeout_s=timeout_s)
        if ranks == 1:
            return [_load_results(out_dir)]
        return [_load_results(os.path.join(out_dir, f"rank{r}")) for r in range(ranks)]


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


def shard(array: np.ndarray, ranks: int, rank: int) -> np.ndarray:
    """Rank ``rank``'s ZeRO shard of ``array`` (docs/ZeRO.md): the flattened
    tensor, zero-padded to ``ranks * S`` with ``S = ceil(size / ranks)``,
    elements ``[rank * S, (rank + 1) * S)``."""
    flat = np.asarray(array).reshape(-1)
    size = -(-flat.size // ranks)
    padded = np.zeros(size * ranks, flat.dtype)
    padded[:flat.size] = flat
    return padded[rank * size:(rank + 1) * size]


def relative_difference(got: np.ndarray, want: np.ndarray) -> float:
    """The largest |got - want| over the largest |want| (a tensor's scale)."""
    scale = max(1e-300, float(np.max(np.abs(want))))
    return float(np.max(np.abs(np.asarray(got) - want))) / scale


def unshard(shards: Sequence[np.ndarray], shape: Sequence[int]) -> np.ndarray:
    """The tensor of ``shape`` whose shards (in rank order) are ``shards``."""
    return np.concatenate(shards)[:int(np.prod(shape))].reshape(shape)
