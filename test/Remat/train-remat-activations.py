# train-remat's activation-budget (PyTorch's activation_memory_budget: the
# activations kept at the loss, as a fraction of the step's without
# recomputation) and its segment checkpoints (max-segment: runs of layers
# whose inner outputs may be recomputed). On a 4-layer Llama with the fused
# loss: every accepted fraction is met on the rewritten step's own timeline;
# with layers alone (max-segment=1) Loom always keeps each layer's input, so
# fractions below that floor are refused with the least it reaches, while
# runs of layers reach below it; where both reach, runs are never slower
# (their candidates include the layers'); the fused attention kernels are
# recomputed as the decomposition is; with budget-mb both bounds hold.
# RUN: %python %s | FileCheck %s
# CHECK: layers alone: floor {{0\.[0-9]+}}; {{[0-9]+}} fractions met
# CHECK: layers alone below the floor: error: train-remat: activation-budget=[[HALF:0\.[0-9]+]] is below the least activations rematerialisation keeps, {{[0-9.]+}} MiB ({{[0-9]+}} bytes, 0.{{[0-9]+}} of the {{[0-9.]+}} MiB the step keeps at the loss)
# CHECK: runs of layers: floor {{0\.0[0-9]+}}; {{[0-9]+}} fractions met, [[HALF]] by runs of {{[2-4]}} layers
# CHECK: fused attention: floor 0.00{{[0-9]}}
# CHECK: runs of layers never slower where both reach
# CHECK: with budget-mb: peak and activations within both
# CHECK-NOT: FAIL

import os
import re
import subprocess
import sys
import tempfile

from loom.models.llama import CONFIGS, build_forward  # noqa: F401
from loom.opt import find_tool

OPT = find_tool("loom-opt")
FIELD = re.compile(r"(\w+) = (-?[0-9.e+]+) : (?:i64|f64)")


def remat(step, options):
    """loom.remat's fields, or the error line."""
    with tempfile.NamedTemporaryFile(suffix=".mlir") as out:
        proc = subprocess.run([OPT, step, "--loom-set-target=device=h100-nvlink", f"--train-remat={options}",
                               "-o", out.name],
                              capture_output=True, text=True)
        if proc.returncode:
            lines = [line for line in proc.stderr.splitlines() if "error:" in line]
            return lines[0].split(": ", 1)[1] if lines else proc.stderr
        text = open(out.name).read()
    match = re.search(r"loom\.remat = \{([^}]*)\}", text)
    return {name: float(value) for name, value in FIELD.findall(match.group(1))}


def fraction(fields):
    return fields["activation_bytes"] / fields["keep_all_activation_bytes"]


def main():
    failed = False
    with tempfile.TemporaryDirectory() as work:
        forward = os.path.join(work, "forward.mlir")
        step = os.path.join(work, "step.mlir")
        subprocess.run([sys.executable, "-m", "loom.models.llama", "--layers", "4", "--dim", "256",
                        "--heads", "8", "--kv-heads", "8", "--ffn", "704", "--vocab", "4096",
                        "--seq", "128", "--batch", "8", "-o", forward], check=True)
        subprocess.run([OPT, forward, "--loom-training-step-pipeline=fuse-cross-entropy=256",
                        "-o", step], check=True)
        fractions = [0.8, 0.6, 0.4, 0.3, 0.2, 0.15, 0.1, 0.05]
        results = {}
        for segment in (1, 4):
            met = {}
            for f in fractions:
                fields = remat(step, f"activation-budget={f} max-segment={segment}")
                if isinstance(fields, str):
                    continue
                if fraction(fields) > f:
                    print(f"FAIL: max-segment={segment} activation-budget={f} keeps "
                          f"{fraction(fields):.3f}")
                    failed = True
                met[f] = fields
            # The floor: every candidate's least, from the error at 0.
            error = remat(step, f"activation-budget=0 max-segment={segment}")
            floor = float(re.search(r"bytes, (0\.[0-9]+) of", error).group(1))
            results[segment] = (met, floor)
        met1, floor1 = results[1]
        print(f"layers alone: floor {floor1:.3f}; {len(met1)} fractions met")
        # Half the layers' floor: out of their reach, within the runs'.
        half = round(floor1 / 2, 3)
        print("layers alone below the floor: " +
              str(remat(step, f"activation-budget={half} max-segment=1")))
        met4, floor4 = results[4]
        below = remat(step, f"activation-budget={half} max-segment=4")
        runs = 0
        if isinstance(below, str) or fraction(below) > half:
            print(f"FAIL: runs of layers at {half}: {below}")
            failed = True
        else:
            runs = int(below["segment_layers"])
        print(f"runs of layers: floor {floor4:.3f}; {len(met4)} fractions met, {half:.3f} by runs "
              f"of {runs} layers")
        if not floor4 < floor1:
            print(f"FAIL: runs of layers reach {floor4:.3f}, layers alone {floor1:.3f}")
            failed = True
        # The fused attention kernels (loomc's default, train-fuse-attention
        # in the sharding phase) are recomputed as the decomposition is.
        fused = os.path.join(work, "fused.mlir")
        subprocess.run([OPT, step, "--pass-pipeline=builtin.module(func.func(train-fuse-attention))",
                        "-o", fused], check=True)
        error = remat(fused, "activation-budget=0 max-segment=4")
        fused_floor = float(re.search(r"bytes, (0\.[0-9]+) of", error).group(1))
        print(f"fused attention: floor {fused_floor:.3f}")
        if fused_floor > floor4 + 1e-3:
            print(f"FAIL: fused attention reaches {fused_floor:.3f}, the decomposition {floor4:.3f}")
            failed = True
        slower = [f for f in met1 if f in met4 and
                  met4[f]["recompute_us"] > met1[f]["recompute_us"] * (1 + 1e-9)]
        if slower:
            print(f"FAIL: runs of layers slower at {slower}")
            failed = True
        print("runs of layers never slower where both reach")
        # Both bounds: a peak budget between the floor and keeping everything.
        fields = remat(step, "activation-budget=0.3")
        budget = (fields["peak_bytes"] + fields["keep_all_peak_bytes"]) / 2
        both = remat(step, f"activation-budget=0.3 budget-mb={budget / 2**20!r}")
        if isinstance(both, str) or both["peak_bytes"] > budget or fraction(both) > 0.3:
            print(f"FAIL: both bounds: {both}")
            failed = True
        else:
            print("with budget-mb: peak and activations within both")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
