# Tests pipeline stages x data-parallel replicas: the tiny Llama's AdamW step
# in f64, split into 2 stages (pp-partition{replicas=2}) and sharded ZeRO-1
# and ZeRO-2 over each stage's 2 replicas (zero-partition on a
# coll.comm_group of the 4-rank world), run by loom-run with one thread per
# rank: rank s * 2 + d runs stage s of replica d. Each rank's results equal
# rank d's of the unpipelined step sharded the same way on 2 ranks (the
# data-parallel trainer a user would run), to 1e-10 relative: the replica's
# loss (averaged over the replicas) on the last stage, every updated
# parameter, and every optimizer-state shard. Replica 0's first microbatch
# has no valid label.
# RUN: %python %s | FileCheck %s
# CHECK: P=2 x D=2 ZeRO-1 M=2 1f1b: loss and 64 tensors on 4 ranks match
# CHECK: P=2 x D=2 ZeRO-2 M=4 zb-h1: loss and 64 tensors on 4 ranks match
# CHECK-NOT: FAIL

import dataclasses
import re
import sys

import numpy as np

from loom.models.llama import CONFIGS, build_forward
from loom.opt import run_opt
from loom.testing import relative_difference, run_function, run_stages, shard

STAGES, REPLICAS = 2, 2
cfg = dataclasses.replace(CONFIGS["tiny"], dtype="f64", vocab=64, seq=8, batch=4)
rng = np.random.default_rng(13)
values = {("param", n): 0.1 * rng.standard_normal(shape) for n, shape in cfg.parameters()}
values[("state", "step")] = np.array(2.0, np.float32)  # the step counter is f32
for n, shape in cfg.parameters():
    values[("state", n + ".m")] = 0.01 * rng.standard_normal(shape)
    values[("state", n + ".v")] = np.abs(0.001 * rng.standard_normal(shape))
# Each replica's batch.
tokens = [rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq)).astype(np.int32)
          for _ in range(REPLICAS)]
labels = [np.roll(t, -1, axis=1) for t in tokens]
labels[0][0:2, :] = cfg.ignore_index
forward = build_forward(cfg)
optimizer = "--train-optimizer=kind=adamw lr=0.01 weight-decay=0.1"

ROLE = re.compile(r'train\.(param|state|input) = "([^"]+)"|train\.(loss)')


def signature(module: str, func: str):
    """The (role, name, sharded) of each argument and result of `func`."""
    line = next(l for l in module.splitlines() if f"func.func @{func}(" in l)
    args, _, results = line.partition(") -> ")

    def parse(text):
        out = []
        for attrs in re.findall(r"\{([^{}]*train\.[^{}]*)\}", text):
            m = ROLE.search(attrs)
            if not m:  # the function's own attributes (train.pipeline, ...)
                continue
            key = ("loss", "loss") if m[3] else (m[1], m[2])
            out.append((key, "train.full_shape" in attrs))
        return out
    return parse(args), parse(results)


def arguments(sig, replica):
    """Replica `replica`'s arguments: its batch, its shard of sharded ones."""
    args = []
    for key, sharded in sig:
        if key == ("input", "tokens"):
            args.append(tokens[replica])
        elif key == ("input", "labels"):
            args.append(labels[replica])
        else:
            value = values[key]
            args.append(shard(value, REPLICAS, replica) if sharded else value)
    return args


def function_text(module: str, func: str) -> str:
    begin = module.index(f"  func.func @{func}(")
    return module[begin:module.index("\n  }\n", begin) + 5]


failures = 0
for zero, micro, schedule in [(1, 2, "1f1b"), (2, 4, "zb-h1")]:
    microbatch = f"--train-microbatch=microbatches={micro}"
    partition = f"--zero-partition=stage={zero} world-size={REPLICAS}"
    # The data-parallel reference: the same step on the replicas alone.
    reference = run_opt(forward, [microbatch, "--train-autodiff", optimizer, partition])
    ref_args, ref_results = signature(reference, "forward")
    want = run_function(reference, "forward",
                        [[arguments([a], d)[0] for d in range(REPLICAS)] for a in ref_args],
                        ranks=REPLICAS)
    want = [dict(zip([k for k, _ in ref_results], out)) for out in want]

    staged = run_opt(forward, [microbatch, "--train-autodiff", optimizer, "--loom-set-target=device=cpu",
                               f"--pp-partition=stages={STAGES} replicas={REPLICAS} "
                               f"schedule={schedule}", partition])
    # loom-run names each rank's entry by its rank: rank s * D + d's is a
    # copy of stage s's function.
    sigs = [signature(staged, f"forward_stage{s}") for s in range(STAGES)]
    copies = "".join(function_text(staged, f"forward_stage{r // REPLICAS}")
                     .replace(f"@forward_stage{r // REPLICAS}(", f"@rank{r}(", 1)
                     for r in range(STAGES * REPLICAS))
    # The attribute aliases (#map...) go with the functions.
    # (The module's own line, with its target, is replaced.)
    grid = staged[:re.search(r"^module\b", staged, re.M).start()] + "module {\n" + copies + "}\n"
    outputs = run_stages(grid, "rank{rank}",
                         [arguments(sigs[r // REPLICAS][0], r % REPLICAS)
                          for r in range(STAGES * REPLICAS)])
    problems, compared, worst = [], set(), 0.0
    for r, out in enumerate(outputs):
        keys = [k for k, _ in sigs[r // REPLICAS][1]]
        if len(out) != len(keys):
            problems.append(f"rank {r} returned {len(out)} results, expected {len(keys)}")
            continue
        for key, got in zip(keys, out):
            worst = max(worst, relative_difference(got, want[r % REPLICAS][key]))
            compared.add(key)
    if compared != set(want[0]):
        problems.append(f"results {sorted(set(want[0]) ^ compared)} missing or extra")
    if worst > 1e-10:
        problems.append(f"largest relative difference {worst:g}")
    line = f"P={STAGES} x D={REPLICAS} ZeRO-{zero} M={micro} {schedule}:"
    if problems:
        failures += 1
        print(line, "FAIL", "; ".join(problems))
    else:
        print(line, f"loss and {len(compared) - 1} tensors on {STAGES * REPLICAS} ranks match")
print(f"failures: {failures}")
sys.exit(1 if failures else 0)
