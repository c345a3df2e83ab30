# Tests that loomc --remat-budget-mb bounds the trainer's memory plan: on two
# models (one rank, and 4 ranks of ZeRO-3) a sweep of budgets from the floor
# to keeping everything gives plans within each budget, growing with it; the
# floor loomc reports is the smallest plan of the sweep, a budget below it is
# an error naming it, and --memory-limit-mb with it bounds the plan too;
# --remat-activations bounds the activations kept at the loss.
# RUN: %python %s | FileCheck %s
# CHECK: 1 rank: {{[0-9]+}} budgets, every plan within its budget, monotonic; floor {{[0-9.]+}} MiB = the smallest plan
# CHECK: 1 rank: below the floor: loomc: error: --remat-budget-mb {{[0-9.]+}} cannot be met: the smallest memory plan Loom reaches is
# CHECK: 1 rank: --memory-limit-mb below the budget bounds the plan
# CHECK: 4 ranks ZeRO-3: {{[0-9]+}} budgets, every plan within its budget, monotonic; floor {{[0-9.]+}} MiB = the smallest plan
# CHECK: 4 ranks ZeRO-3: below the floor: loomc: error: --remat-budget-mb
# CHECK: 1 rank: --remat-activations=0.3 keeps at most that fraction
# CHECK: 4 ranks ZeRO-3: --remat-activations=0.3 keeps at most that fraction
# CHECK-NOT: FAIL

import dataclasses
import math
import os
import re
import subprocess
import sys
import tempfile

from loom.models.llama import CONFIGS, build_forward
from loom.opt import find_tool

MIB = 1024.0 * 1024.0
PLAN = re.compile(r"memory plan is [0-9.]+ MiB \(([0-9]+) bytes\)")
FLOOR = re.compile(r"from [0-9.]+ MiB \(([0-9]+) bytes, the floor\)")
KEEP_ALL = re.compile(r"keeps everything; its memory plan is [0-9.]+ MiB \(([0-9]+) bytes\)")


def compile_(forward, flags, budget_mb, *extra):
    """loomc's stderr and exit code for the memory plan under `budget_mb`."""
    proc = subprocess.run([find_tool("loomc"), forward, *flags, "--emit=memory-plan",
                           f"--remat-budget-mb={budget_mb!r}",
                           *extra, "-o", os.devnull], capture_output=True, text=True)
    return proc.stderr, proc.returncode


def sweep(name, forward, flags):
    failed = False
    # Keeping everything: a budget far above the step.
    out, rc = compile_(forward, flags, 1e6)
    keep_all = int(KEEP_ALL.search(out).group(1))
    # Just below it: the remark names the floor.
    out, rc = compile_(forward, flags, (keep_all - 1) / MIB)
    floor = int(FLOOR.search(out).group(1))
    budgets = [floor / MIB] + [(floor + (keep_all - floor) * k / 6) / MIB for k in range(1, 7)]
    plans = []
    for budget in budgets:
        out, rc = compile_(forward, flags, budget)
        match = PLAN.search(out) or KEEP_ALL.search(out)
        if rc or not match:
            print(f"FAIL {name}: budget {budget:.4f} MiB refused: {out.strip()[-400:]}")
            return
        plans.append(int(match.group(1)))
        if plans[-1] > budget * MIB:
            print(f"FAIL {name}: budget {budget:.4f} MiB planned {plans[-1] / MIB:.4f}")
            failed = True
    if any(b < a for a, b in zip(plans, plans[1:])):
        print(f"FAIL {name}: plans {plans} not monotonic in the budgets")
        failed = True
    if min(plans) != floor or plans[-1] != keep_all:
        print(f"FAIL {name}: floor {floor}, keep-all {keep_all}, plans {plans}")
        failed = True
    if not failed:
        print(f"{name}: {len(budgets)} budgets, every plan within its budget, monotonic; "
              f"floor {floor / MIB:.3f} MiB = the smallest plan")
    out, rc = compile_(forward, flags, (floor - 1024) / MIB)
    error = next((line for line in out.splitlines() if "error" in line), "")
    # The floor is printed rounded up, so that the figure as printed is a
    # budget loomc accepts.
    printed = f"{math.ceil(floor / MIB * 1000) / 1000:.3f}"
    if rc == 0 or f"reaches is {printed} MiB" not in error:
        print(f"FAIL {name}: a budget below the floor: exit {rc}, {out.strip()[-400:]}")
    else:
        print(f"{name}: below the floor: {error}")
    out, rc = compile_(forward, flags, float(printed))
    if rc:
        print(f"FAIL {name}: the floor as printed ({printed} MiB) is refused: {out.strip()[-400:]}")
    return budgets


with tempfile.TemporaryDirectory() as tmp:
    one = os.path.join(tmp, "b8-s128.mlir")
    with open(one, "w") as f:
        f.write(build_forward(dataclasses.replace(CONFIGS["tiny"], batch=8, seq=128)))
    budgets = sweep("1 rank", one, [])
    # Both flags: the lower one bounds the plan (here the memory limit).
    if budgets:
        limit = budgets[2]
        out, rc = compile_(one, [], budgets[5], f"--memory-limit-mb={limit!r}")
        match = PLAN.search(out)
        if rc == 0 and match and int(match.group(1)) <= limit * MIB and "--memory-limit-mb" in out:
            print("1 rank: --memory-limit-mb below the budget bounds the plan")
        else:
            print(f"FAIL 1 rank: --memory-limit-mb {limit:.4f} with --remat-budget-mb "
                  f"{budgets[5]:.4f}: exit {rc}, {out.strip()[-400:]}")
    four = os.path.join(tmp, "b2-s128.mlir")
    with open(four, "w") as f:
        f.write(build_forward(dataclasses.replace(CONFIGS["tiny"], batch=2, seq=128)))
    sweep("4 ranks ZeRO-3", four, ["--world-size", "4", "--zero-stage", "3"])
    # --remat-activations: the step keeps at most that fraction at the loss.
    for name, forward, flags in (("1 rank", one, []),
                                 ("4 ranks ZeRO-3", four, ["--world-size", "4", "--zero-stage", "3"])):
        step = os.path.join(tmp, "step.mlir")
        proc = subprocess.run([find_tool("loomc"), forward, *flags, "--emit=step",
                               "--remat-activations=0.3", "-o", step], capture_output=True, text=True)
        fields = dict(re.findall(r"(\w+) = ([0-9]+) : i64", open(step).read())) if not proc.returncode else {}
        kept = int(fields.get("activation_bytes", -1)) / max(1, int(fields.get("keep_all_activation_bytes", 1)))
        if proc.returncode or not 0 <= kept <= 0.3:
            print(f"FAIL {name}: --remat-activations=0.3 keeps {kept:.3f}: {proc.stderr.strip()[-400:]}")
        else:
            print(f"{name}: --remat-activations=0.3 keeps at most that fraction")
sys.exit(0)
