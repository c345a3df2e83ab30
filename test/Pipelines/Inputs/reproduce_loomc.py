"""Runs loomc with -v, then the pipelines it printed, one loom-opt process a
phase, each on the previous one's output; prints the phases and whether the
last output equals loomc's byte for byte (exit 1 if not). The files between
phases keep their locations (-mlir-print-debuginfo), which carry the op ids
the profile probes need. With --single, the phases run as one pipeline in
one loom-opt invocation instead.

    reproduce_loomc.py FORWARD [--single] --emit=E [loomc flags...]
"""

import os
import re
import subprocess
import sys
import tempfile

PHASE = re.compile(r"^loomc: phase ([a-z-]+): --pass-pipeline='(.*)'$")


def main() -> int:
    forward, flags = sys.argv[1], sys.argv[2:]
    single = "--single" in flags
    flags = [f for f in flags if f != "--single"]
    with tempfile.TemporaryDirectory() as tmp:
        expected = os.path.join(tmp, "loomc.mlir")
        proc = subprocess.run(["loomc", forward, *flags, "-v", "-o", expected],
                              capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"loomc failed:\n{proc.stderr}")
        phases = [m.groups() for m in map(PHASE.match, proc.stderr.splitlines()) if m]
        current = forward
        if single:
            # builtin.module(a) + builtin.module(b) -> builtin.module(a,b)
            inner = ",".join(p[len("builtin.module("):-1] for _, p in phases)
            phases = [("all", f"builtin.module({inner})")]
        for index, (phase, pipeline) in enumerate(phases):
            print(f"phase {phase}: {pipeline.split('{')[0]}")
            out = os.path.join(tmp, f"{index}.mlir")
            last = index + 1 == len(phases)
            step = subprocess.run(["loom-opt", current, f"--pass-pipeline={pipeline}", "-o", out,
                                   *([] if last else ["-mlir-print-debuginfo"])],
                                  capture_output=True, text=True)
            if step.returncode:
                sys.exit(f"loom-opt failed in phase {phase}:\n{step.stderr}")
            current = out
        mine, theirs = open(current, "rb").read(), open(expected, "rb").read()
        if mine != theirs:
            at = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            lo = max(0, at - 80)
            print(f"differ at byte {at} ({len(mine)} and {len(theirs)} bytes): loom-opt {mine[lo:at + 80]!r}, "
                  f"loomc {theirs[lo:at + 80]!r}")
            return 1
        print(f"identical: {len(mine)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
