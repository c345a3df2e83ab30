# Tests ZeRO on several ranks: the tiny Llama's AdamW step, partitioned and
# run by loom-run on 3 and 4 simulated ranks (3 does not divide the norm
# weights, so padding is exercised), each rank with its own micro-batch,
# against data parallelism done by hand: per-rank gradients from the
# unpartitioned step, averaged, and one AdamW update in NumPy.
# RUN: %python %s | FileCheck %s
# CHECK: 3 ranks, stage 3: loss, 21 parameters and 42 moments match
# CHECK: 4 ranks, stage 1: loss, 21 parameters and 42 moments match
# CHECK: 4 ranks, stage 2 + bucketing: loss, 21 parameters and 42 moments match
# CHECK: 4 ranks, stage 3 + selective gather + bucketing + prefetch: loss, 21 parameters and 42 moments match
# CHECK: 3 ranks, stage 2 + schedule pipeline: loss, 21 parameters and 42 moments match
# CHECK: 4 ranks, stage 3 + schedule pipeline: loss, 21 parameters and 42 moments match
# CHECK-NOT: FAIL

import math
import sys

import numpy as np

from loom.models.llama import CONFIGS, build_forward
from loom.opt import run_opt
from loom.testing import run_function, shard, unshard

TOLERANCE = 2e-5
LR, B1, B2, EPS, WD = 0.01, 0.9, 0.999, 1e-8, 0.1
cfg = CONFIGS["tiny"]
names = [name for name, _ in cfg.parameters()]
rng = np.random.default_rng(5)
params = [(rng.standard_normal(shape) / math.sqrt(shape[-1]) + (1.0 if name.endswith("norm") else 0.0))
          .astype(np.float32) for name, shape in cfg.parameters()]

forward = build_forward(cfg)
grads_step = run_opt(forward, ["--train-autodiff"])
adamw_step = run_opt(forward, ["--train-autodiff",
                               f"--train-optimizer=kind=adamw lr={LR} weight-decay={WD}"])


failures = 0


def check(ranks, stage, extra, label):
    global failures
    batches = [rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq)).astype(np.int32) for _ in range(ranks)]
    labels = [np.roll(b, -1, axis=1) for b in batches]
    # Reference: average the per-rank gradients and losses, update once.
    # One loom-run for every rank's micro-batch: the step is compiled once.
    losses, grads = [], [np.zeros_like(p) for p in params]
    for out in run_function(grads_step, "forward", params + [batches, labels], ranks=ranks):
        losses.append(float(out[0]))
        for g, rank_grad in zip(grads, out[1:]):
            g += rank_grad / ranks
    m = [(1 - B1) * g for g in grads]
    v = [(1 - B2) * g * g for g in grads]
    new = [p - LR * ((mi / (1 - B1)) / (np.sqrt(vi / (1 - B2)) + EPS) + WD * p)
           for p, mi, vi in zip(params, m, v)]

    sharded = run_opt(adamw_step, [f"--zero-partition=stage={stage} world-size={ranks}", *extra])
    if any("coll-bucket" in flag for flag in extra):
        assert "tensor.concat" in sharded, "coll-bucket merged nothing"
    if stage == 3:
        param_args = [[shard(p, ranks, r) for r in range(ranks)] for p in params]
    else:
        param_args = list(params)
    state = [np.zeros((), np.float32)]
    for p in params:
        zeros = [np.zeros_like(shard(p, ranks, r)) for r in range(ranks)]
        state += [zeros, zeros]
    outs = run_function(sharded, "forward", param_args + state + [batches, labels], ranks=ranks)

    count = len(params)
    problems = []
    for r in range(ranks):
        if abs(float(outs[r][0]) - np.mean(losses)) > TOLERANCE * abs(np.mean(losses)):
            problems.append(f"rank {r} loss {float(outs[r][0])} != {np.mean(losses)}")
    for i, (name, want) in enumerate(zip(names, new)):
        got = (unshard([outs[r][1 + i] for r in range(ranks)], want.shape) if stage == 3
               else outs[0][1 + i])
        if stage != 3:
            for r in range(1, ranks):
                if not np.array_equal(outs[r][1 + i], got):
                    problems.append(f"{name}: ranks disagree")
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        if err > TOLERANCE:
            problems.append(f"{name}: relative error {err:.2e}")
    for i, (name, mw, vw) in enumerate(zip(names, m, v)):
        base = 1 + count + 1 + 2 * i
        for label_, want, off in (("m", mw, 0), ("v", vw, 1)):
            got = unshard([outs[r][base + off] for r in range(ranks)], want.shape)
            err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
            if err > TOLERANCE:
                problems.append(f"{name}.{label_}: relative error {err:.2e}")
    if problems:
        failures += 1
        print(f"FAIL {ranks} ranks, {label}: " + "; ".join(problems[:5]))
    else:
        print(f"{ranks} ranks, {label}: loss, {count} parameters and {2 * count} moments match")


check(3, 3, [], "stage 3")
check(4, 1, [], "stage 1")
check(4, 2, ["--loom-set-target=device=cpu", "--coll-bucket"], "stage 2 + bucketing")
check(4, 3, ["--loom-set-target=device=h100-nvlink", "--zero-selective-gather=budget-mb=1",
             "--loom-set-target=device=cpu", "--coll-bucket", "--coll-prefetch"],
      "stage 3 + selective gather + bucketing + prefetch")
check(3, 2, ["--loom-set-target=device=h100-ib", "--loom-schedule-pipeline"], "stage 2 + schedule pipeline")
check(4, 3, ["--loom-set-target=device=cpu", "--loom-schedule-pipeline=gather-budget-mb=1"],
      "stage 3 + schedule pipeline")
sys.exit(1 if failures else 0)
