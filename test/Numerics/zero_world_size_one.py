# Tests that zero-partition at world-size=1 computes exactly what the step
# computed before, for stages 1, 2 and 3: the tiny Llama's AdamW step, run by
# loom-run, gives bitwise-identical losses, parameters and optimizer state.
# RUN: %python %s | FileCheck %s
# CHECK: stage 1: {{[0-9]+}} outputs bitwise identical
# CHECK: stage 2: {{[0-9]+}} outputs bitwise identical
# CHECK: stage 3: {{[0-9]+}} outputs bitwise identical
# CHECK: stage 3 + selective gather: {{[0-9]+}} outputs bitwise identical
# CHECK: stage 2 + bucketing: {{[0-9]+}} outputs bitwise identical
# CHECK: stage 3 + selective gather + bucketing: {{[0-9]+}} outputs bitwise identical
# CHECK-NOT: FAIL

import sys

import numpy as np

from loom.models.llama import CONFIGS, build_forward
from loom.opt import run_opt
from loom.testing import run_function

cfg = CONFIGS["tiny"]
rng = np.random.default_rng(11)
params = [(0.1 * rng.standard_normal(shape)).astype(np.float32) for _, shape in cfg.parameters()]
# A step already taken: non-zero moments and counter.
state = [np.array(3.0, np.float32)]
for p in params:
    state += [(0.01 * rng.standard_normal(p.shape)).astype(np.float32),
              np.abs(0.001 * rng.standard_normal(p.shape)).astype(np.float32)]
tokens = rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq)).astype(np.int32)
labels = np.roll(tokens, -1, axis=1)

step = run_opt(build_forward(cfg), ["--train-autodiff", "--train-optimizer=kind=adamw lr=0.01 weight-decay=0.1"])
expected = run_function(step, "forward", params + state + [tokens, labels])

failures = 0
SELECTIVE = "--zero-selective-gather=budget-mb=1"
BUCKET = "--coll-bucket"
for stage, extra in ((1, []), (2, []), (3, []), (3, [SELECTIVE]), (2, [BUCKET]), (3, [SELECTIVE, BUCKET])):
    passes = ["--loom-set-target=device=cpu", f"--zero-partition=stage={stage} world-size=1", *extra]
    if BUCKET in extra:
        # Bucketing must actually merge something for the check to mean much.
        merged = run_opt(step, passes)
        assert "tensor.concat" in merged, "coll-bucket merged nothing"
    sharded = run_opt(step, [*passes, "--canonicalize"])
    flat = lambda arrays: [a.reshape(-1) if a.ndim > 0 else a for a in arrays]  # noqa: E731
    args = (flat(params) if stage == 3 else params) + [state[0]] + flat(state[1:]) + [tokens, labels]
    got = run_function(sharded, "forward", args)
    same = len(got) == len(expected) and all(
        g.tobytes() == e.reshape(g.shape).tobytes() for g, e in zip(got, expected))
    failures += not same
    name = f"stage {stage}" + "".join(
        {SELECTIVE: " + selective gather", BUCKET: " + bucketing"}[flag] for flag in extra)
    print(f"{name}: {len(got)} outputs {'bitwise identical' if same else 'FAIL: differ'}")
sys.exit(1 if failures else 0)
