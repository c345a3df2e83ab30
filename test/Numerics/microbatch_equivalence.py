# Tests that train-microbatch leaves the step's mathematics unchanged: the
# tiny Llama's loss and gradients in f64, with its batch split into 2 and 4
# microbatches (one of which has every label ignored), equal the
# unsplit step's to 1e-12 relative, and the loss over a batch whose labels
# are all ignored is 0 with zero gradients, not NaN.
# RUN: %python %s | FileCheck %s
# CHECK: microbatches 2: loss and 21 gradients match
# CHECK: microbatches 4: loss and 21 gradients match
# CHECK: all ignored, microbatches 4: loss 0, gradients 0
# CHECK-NOT: FAIL

import dataclasses

import numpy as np

from loom.models.llama import CONFIGS, build_forward
from loom.opt import run_opt
from loom.testing import run_function

cfg = dataclasses.replace(CONFIGS["tiny"], dtype="f64", vocab=64, seq=16, batch=8)
rng = np.random.default_rng(7)
params = [(0.1 * rng.standard_normal(shape)) for _, shape in cfg.parameters()]
tokens = rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq)).astype(np.int32)
labels = np.roll(tokens, -1, axis=1)
labels[2:4, :] = cfg.ignore_index  # microbatch 1 of 4 has no valid label
labels[5, 3:] = cfg.ignore_index
forward = build_forward(cfg)

failures = 0


def step(micro, lab):
    passes = ([f"--train-microbatch=microbatches={micro}"] if micro > 1 else []) + ["--train-autodiff"]
    return run_function(run_opt(forward, passes), "forward", params + [tokens, lab])


expected = step(1, labels)
for micro in (2, 4):
    got = step(micro, labels)
    worst = max(float(np.max(np.abs(a - b)) / max(1e-300, float(np.max(np.abs(a)))))
                for a, b in zip(expected, got))
    if len(got) == len(expected) and worst < 1e-12:
        print(f"microbatches {micro}: loss and {len(got) - 1} gradients match")
    else:
        failures += 1
        print(f"microbatches {micro}: FAIL (largest relative difference {worst:g})")

ignored = np.full_like(labels, cfg.ignore_index)
got = step(4, ignored)
if all(np.all(np.isfinite(x)) and np.all(x == 0) for x in got):
    print("all ignored, microbatches 4: loss 0, gradients 0")
else:
    failures += 1
    print("all ignored, microbatches 4: FAIL", [float(np.max(np.abs(x))) for x in got])
print(f"failures: {failures}")
