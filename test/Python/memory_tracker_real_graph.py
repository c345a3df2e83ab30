# Tests that the incremental MemoryTracker agrees with the MemoryTimeline at
# every op of real training steps: the tiny Llama after AdamW and ZeRO-3, with
# and without selective gather, bucketing and eager prefetch.
# RUN: %python %s | FileCheck %s
# CHECK: stage 3: tracker agrees, peak
# CHECK: stage 3 + selective gather + bucketing: tracker agrees, peak
# CHECK: stage 2 + eager prefetch: tracker agrees, peak
# CHECK: stage 3 + coll-prefetch: tracker agrees, peak

import re
import subprocess

from loom.models.llama import CONFIGS, build_forward
from loom.opt import find_tool

step = ["--train-autodiff", "--train-optimizer"]
cases = {
    "stage 3": ["--zero-partition=stage=3 world-size=4"],
    "stage 3 + selective gather + bucketing": [
        "--zero-partition=stage=3 world-size=4", "--zero-selective-gather=budget-mb=1",
        "--coll-bucket"],
    "stage 2 + eager prefetch": [
        "--zero-partition=stage=2 world-size=4", "--coll-reorder-baseline=policy=eager-prefetch"],
    "stage 3 + coll-prefetch": ["--zero-partition=stage=3 world-size=4", "--coll-prefetch"],
}
forward = build_forward(CONFIGS["tiny"])
for name, passes in cases.items():
    proc = subprocess.run([find_tool("loom-opt"), "-", "--loom-set-target=device=cpu", *step, *passes,
                           "--coll-report=check-tracker=true", "-o", "/dev/null"],
                          input=forward, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    peak = re.search(r"peak memory ([0-9.]+ [KMG]iB)", proc.stderr).group(1)
    print(f"{name}: tracker agrees, peak {peak}")
