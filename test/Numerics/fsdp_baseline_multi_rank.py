# Tests that coll-reorder-baseline's fsdp policy, which merges each unit's
# gathers and gradient reduce-scatters into flat collectives, computes the
# same step: the tiny Llama's AdamW step in f64, partitioned (ZeRO-3 and
# ZeRO-2) and run by loom-run on 2 simulated ranks, each with its own
# micro-batch, in the fsdp order and in the synchronous one (unmerged),
# against data parallelism done by hand (per-rank gradients from the
# unpartitioned step, averaged, one NumPy AdamW update). The loss, every
# parameter and every moment must agree to 1e-10 relative. It also counts
# the collectives: one all-gather per unit and use, one reduce-scatter per
# unit (the tiny model has 3 units: layers.0, layers.1 and the root).
# RUN: %python %s | FileCheck %s
# CHECK: stage 3, fsdp: 6 all-gathers, 3 reduce-scatters
# CHECK: stage 3, synchronous: 41 all-gathers, 21 reduce-scatters
# CHECK: stage 3: fsdp and synchronous orders match each other and the reference (loss, 21 parameters, 42 moments)
# CHECK: stage 2, fsdp: 3 all-gathers, 3 reduce-scatters
# CHECK: stage 2, synchronous: 21 all-gathers, 21 reduce-scatters
# CHECK: stage 2: fsdp and synchronous orders match each other and the reference (loss, 21 parameters, 42 moments)
# CHECK-NOT: FAIL

import dataclasses
import math
import sys

import numpy as np

from loom.models.llama import CONFIGS, build_forward
from loom.opt import run_opt
from loom.testing import run_function, shard, unshard

RANKS = 2
TOLERANCE = 1e-10
LR, B1, B2, EPS, WD = 0.01, 0.9, 0.999, 1e-8, 0.1
cfg = dataclasses.replace(CONFIGS["tiny"], dtype="f64")
names = [name for name, _ in cfg.parameters()]
rng = np.random.default_rng(11)
params = [rng.standard_normal(shape) / math.sqrt(shape[-1]) + (1.0 if name.endswith("norm") else 0.0)
          for name, shape in cfg.parameters()]
batches = [rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq)).astype(np.int32) for _ in range(RANKS)]
labels = [np.roll(b, -1, axis=1) for b in batches]

forward = build_forward(cfg)
grads_step = run_opt(forward, ["--train-autodiff"])
adamw_step = run_opt(forward, ["--train-autodiff",
                               f"--train-optimizer=kind=adamw lr={LR} weight-decay={WD}"])

# Reference: average the per-rank gradients and losses, update once.
# One loom-run for every rank's micro-batch: the step is compiled once.
losses, grads = [], [np.zeros_like(p) for p in params]
for out in run_function(grads_step, "forward", params + [list(batches), list(labels)],
                        ranks=RANKS):
    losses.append(float(out[0]))
    for g, rank_grad in zip(grads, out[1:]):
        g += rank_grad / RANKS
# train-optimizer rounds the bias corrections to f32 (its step counter's type).
C1, C2 = float(np.float32(1 - B1)), float(np.float32(1 - B2))
m = [(1 - B1) * g for g in grads]
v = [(1 - B2) * g * g for g in grads]
new = [p - LR * ((mi / C1) / (np.sqrt(vi / C2) + EPS) + WD * p)
       for p, mi, vi in zip(params, m, v)]


def relative(got, want):
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300))


def run(stage, policy):
    """The step in `policy`'s order on RANKS ranks: per rank, the loss, the
    whole updated parameters and the whole moments."""
    sharded = run_opt(adamw_step, [f"--zero-partition=stage={stage} world-size={RANKS}",
                                   f"--coll-reorder-baseline=policy={policy}"])
    print(f"stage {stage}, {policy}: {sharded.count('coll.all_gather_start')} all-gathers, "
          f"{sharded.count('coll.reduce_scatter_start')} reduce-scatters")
    param_args = ([[shard(p, RANKS, r) for r in range(RANKS)] for p in params] if stage == 3
                  else list(params))
    state = [np.zeros((), np.float32)]  # the step counter is f32
    for p in params:
        zeros = [np.zeros_like(shard(p, RANKS, r)) for r in range(RANKS)]
        state += [zeros, zeros]
    outs = run_function(sharded, "forward", param_args + state + [batches, labels], ranks=RANKS)
    count = len(params)
    result = []
    for r in range(RANKS):
        updated = [unshard([outs[q][1 + i] for q in range(RANKS)], p.shape) if stage == 3
                   else outs[r][1 + i] for i, p in enumerate(params)]
        moments = [unshard([outs[q][1 + count + 1 + 2 * i + k] for q in range(RANKS)], p.shape)
                   for i, p in enumerate(params) for k in (0, 1)]
        result.append((float(outs[r][0]), updated, moments))
    return result


failures = 0
want_moments = [x for pair in zip(m, v) for x in pair]
for stage in (3, 2):
    fsdp = run(stage, "fsdp")
    sync = run(stage, "synchronous")
    problems = []
    for label_, got in (("fsdp", fsdp), ("synchronous", sync)):
        for r, (loss, updated, moments) in enumerate(got):
            if abs(loss - np.mean(losses)) > TOLERANCE * abs(np.mean(losses)):
                problems.append(f"{label_} rank {r} loss {loss} != {np.mean(losses)}")
            for name, a, b in zip(names, updated, new):
                if relative(a, b) > TOLERANCE:
                    problems.append(f"{label_} rank {r} {name}: relative error {relative(a, b):.2e}")
            for i, (a, b) in enumerate(zip(moments, want_moments)):
                if relative(a, b) > TOLERANCE:
                    problems.append(f"{label_} {names[i // 2]}.{'mv'[i % 2]}: relative error "
                                    f"{relative(a, b):.2e}")
    for r in range(RANKS):
        a, b = fsdp[r], sync[r]
        worst = max([abs(a[0] - b[0]) / abs(b[0])] +
                    [relative(x, y) for x, y in zip(a[1] + a[2], b[1] + b[2])])
        if worst > TOLERANCE:
            problems.append(f"rank {r}: fsdp differs from synchronous by {worst:.2e}")
    if problems:
        failures += 1
        print(f"FAIL stage {stage}: " + "; ".join(problems[:5]))
    else:
        print(f"stage {stage}: fsdp and synchronous orders match each other and the reference "
              f"(loss, {len(params)} parameters, {2 * len(params)} moments)")
sys.exit(1 if failures else 0)
