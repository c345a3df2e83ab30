# Tests that pp-partition's stage programs compute the single-stage step: the
# tiny Llama's AdamW step in f64, split into 2 and 4 stages, 4 and 8
# microbatches, under GPipe, 1F1B and ZB-H1, run by loom-run with one thread
# per stage exchanging activations and gradients point to point. The last
# stage's loss and every stage's updated parameters and optimizer state equal
# the unpipelined step's to 1e-10 relative, with whole microbatches of
# ignored labels in the batch.
# RUN: %python %s | FileCheck %s
# CHECK: P=2 M=4 gpipe: loss and 64 tensors match
# CHECK: P=2 M=8 zb-h1: loss and 64 tensors match
# CHECK: P=4 M=4 1f1b: loss and 64 tensors match
# CHECK: P=4 M=8 zb-h1: loss and 64 tensors match
# CHECK-NOT: FAIL

import dataclasses
import re
import sys

import numpy as np

from loom.models.llama import CONFIGS, build_forward
from loom.opt import run_opt
from loom.testing import relative_difference, run_function, run_stages

cfg = dataclasses.replace(CONFIGS["tiny"], dtype="f64", vocab=64, seq=8, batch=8)
rng = np.random.default_rng(11)
names = [name for name, _ in cfg.parameters()]
values = {("param", n): 0.1 * rng.standard_normal(shape) for n, shape in cfg.parameters()}
values[("state", "step")] = np.array(2.0, np.float32)  # the step counter is f32
for n, shape in cfg.parameters():
    values[("state", n + ".m")] = 0.01 * rng.standard_normal(shape)
    values[("state", n + ".v")] = np.abs(0.001 * rng.standard_normal(shape))
tokens = rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq)).astype(np.int32)
labels = np.roll(tokens, -1, axis=1)
labels[0:2, :] = cfg.ignore_index  # whole microbatches without a valid label
values[("input", "tokens")] = tokens
values[("input", "labels")] = labels
forward = build_forward(cfg)
optimizer = "--train-optimizer=kind=adamw lr=0.01 weight-decay=0.1"


def signature(module: str, func: str):
    """The (role, name) of each argument and result of `func`."""
    line = next(l for l in module.splitlines() if f"func.func @{func}(" in l)
    args, _, results = line.partition(") -> ")
    role = r'\{train\.(param|state|input) = "([^"]+)"\}|\{(train\.loss)\}'
    parse = lambda text: [("loss", "loss") if m[2] else (m[0], m[1])
                          for m in [(a, b, c) for a, b, c in re.findall(role, text)]]
    return parse(args), parse(results)


step = run_opt(forward, ["--train-autodiff", optimizer])
step_args, step_results = signature(step, "forward")
for (role, name) in step_args:
    if (role, name) not in values:
        sys.exit(f"no value for {role} {name}")
expected = dict(zip(step_results, run_function(step, "forward", [values[a] for a in step_args])))

failures = 0
# Each schedule, each stage count and microbatch count (all eight combinations
# pass; four keep the test short).
for stages, micro, schedule in [(2, 4, "gpipe"), (2, 8, "zb-h1"), (4, 4, "1f1b"), (4, 8, "zb-h1")]:
    staged = run_opt(forward, [f"--train-microbatch=microbatches={micro}", "--train-autodiff", optimizer,
                               "--loom-set-target=device=cpu", f"--pp-partition=stages={stages} schedule={schedule}"])
    sigs = [signature(staged, f"forward_stage{s}") for s in range(stages)]
    outputs = run_stages(staged, "forward_stage{rank}", [[values[a] for a in sig[0]] for sig in sigs])
    got = {}
    problems = []
    for s, (sig, out) in enumerate(zip(sigs, outputs)):
        for key, array in zip(sig[1], out):
            if key in got and not np.array_equal(got[key], array):
                problems.append(f"{key} differs between stages")
            got[key] = array
    if set(got) != set(expected):
        problems.append(f"results {sorted(set(expected) ^ set(got))} missing or extra")
    worst = 0.0
    for key in expected:
        if key in got:
            worst = max(worst, relative_difference(got[key], expected[key]))
    if worst > 1e-10:
        problems.append(f"largest relative difference {worst:g}")
    line = f"P={stages} M={micro} {schedule}:"
    if problems:
        failures += 1
        print(line, "FAIL", "; ".join(problems))
    else:
        print(line, f"loss and {len(got) - 1} tensors match")
print(f"failures: {failures}")
