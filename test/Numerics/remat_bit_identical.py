# Tests that train-remat's rewrite computes exactly what the step computed:
# the tiny Llama's AdamW step in f64, ZeRO-3 on 1 rank and on 4 simulated
# ranks, run by loom-run before and after rematerialisation under every
# policy, gives bitwise-identical losses, parameters and optimizer state, and
# every policy but none really recomputes something.
# RUN: %python %s | FileCheck %s
# CHECK: 1 ranks none: 0 ops cloned, {{[0-9]+}} outputs bitwise identical
# CHECK: 1 ranks every-layer: {{[1-9][0-9]*}} ops cloned, {{[0-9]+}} outputs bitwise identical
# CHECK: 1 ranks sqrt: {{[1-9][0-9]*}} ops cloned
# CHECK: 1 ranks knapsack: {{[1-9][0-9]*}} ops cloned
# CHECK: 1 ranks chain: {{[1-9][0-9]*}} ops cloned
# CHECK: 1 ranks ilp: {{[1-9][0-9]*}} ops cloned
# CHECK: 4 ranks none: 0 ops cloned
# CHECK: 4 ranks every-layer: {{[1-9][0-9]*}} ops cloned, {{[0-9]+}} outputs bitwise identical
# CHECK: 4 ranks ilp: {{[1-9][0-9]*}} ops cloned, {{[0-9]+}} outputs bitwise identical
# CHECK-NOT: FAIL

import dataclasses
import re

import numpy as np

from loom.models.llama import CONFIGS, build_forward
from loom.opt import run_opt
from loom.testing import run_function

# Sequences of 64 and a small vocabulary: activations dominate the peak.
cfg = dataclasses.replace(CONFIGS["tiny"], dtype="f64", vocab=64, seq=64)
rng = np.random.default_rng(5)
params = [(0.1 * rng.standard_normal(shape)) for _, shape in cfg.parameters()]
state = [np.array(2.0, np.float32)]  # the step counter is f32
for p in params:
    state += [0.01 * rng.standard_normal(p.shape), np.abs(0.001 * rng.standard_normal(p.shape))]
tokens = rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq)).astype(np.int32)
labels = np.roll(tokens, -1, axis=1)
forward = build_forward(cfg)
step_passes = ["--train-autodiff", "--train-optimizer=kind=adamw lr=0.01 weight-decay=0.1"]


def shard(array, ranks):
    """Each rank's ZeRO-3 shard of a flattened, zero-padded array."""
    flat = np.asarray(array).reshape(-1)
    size = -(-flat.size // ranks)
    padded = np.concatenate([flat, np.zeros(size * ranks - flat.size, flat.dtype)])
    return [padded[r * size:(r + 1) * size] for r in range(ranks)]


failures = 0
for ranks in (1, 4):
    sharded = run_opt(forward, step_passes + [f"--zero-partition=stage=3 world-size={ranks}"])
    if ranks == 1:
        args = [shard(p, 1)[0] for p in params] + [state[0]]
        args += [shard(s, 1)[0] for s in state[1:]] + [tokens, labels]
    else:
        args = [shard(p, ranks) for p in params] + [state[0]]
        args += [shard(s, ranks) for s in state[1:]]
        # Every rank trains on its own micro-batch.
        args += [[np.roll(tokens, r, axis=0) for r in range(ranks)],
                 [np.roll(labels, r, axis=0) for r in range(ranks)]]
    expected = run_function(sharded, "forward", args, ranks=ranks)
    peaks = {}
    for policy in ("none", "every-layer", "sqrt", "knapsack", "chain", "ilp"):
        if ranks == 4 and policy not in ("none", "every-layer", "ilp"):
            continue
        options = f"solver={policy}"
        if policy in ("knapsack", "chain", "ilp"):
            # Half way from every-layer's peak to keeping everything.
            budget = (peaks["none"] + peaks["every-layer"]) / 2 / 2**20
            options += f" budget-mb={budget}"
        remat = run_opt(sharded, ["--loom-set-target=device=cpu", f"--train-remat={options}"])
        peaks[policy] = int(re.search(r"(?<![a-z_])peak_bytes = (\d+)", remat).group(1))
        cloned = int(re.search(r"cloned_ops = (\d+)", remat).group(1))
        got = run_function(remat, "forward", args, ranks=ranks)
        flat_expected = expected if ranks == 1 else [x for rank in expected for x in rank]
        flat_got = got if ranks == 1 else [x for rank in got for x in rank]
        same = len(flat_expected) == len(flat_got) and all(
            a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(flat_expected, flat_got))
        line = f"{ranks} ranks {policy}: {cloned} ops cloned, {len(flat_got)} outputs"
        if same:
            print(f"{line} bitwise identical")
        else:
            failures += 1
            worst = max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
                        for a, b in zip(flat_expected, flat_got))
            print(f"{line} FAIL (largest difference {worst:g})")
print(f"failures: {failures}")
