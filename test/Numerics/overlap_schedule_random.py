# Tests coll-overlap-schedule on 300 random DAGs (compute chains, gathers of
# shards, reduce-scatters of computed values, releases): the output verifies,
# its peak memory never exceeds the original order's, and its simulated
# makespan is never longer. Also checks coll-prefetch the same way, with and
# without overtaking.
# RUN: %python %s | FileCheck %s
# CHECK: 300 random DAGs: all verify, peak <= original, makespan <= original
# CHECK-NOT: FAIL

import json
import os
import random
import subprocess
import sys
import tempfile

from loom.opt import find_tool

RANKS = 4
SHARDS = [256, 1024, 4096]


def random_dag(rng):
    """A single-block function of exps/adds over values of a few sizes."""
    lines, values, args = [], {}, []
    def fresh(prefix):
        fresh.n += 1
        return f"%{prefix}{fresh.n}"
    fresh.n = 0
    for shard in SHARDS:
        args.append((f"%in{shard}", RANKS * shard))
        args.append((f"%sh{shard}", shard))
        values.setdefault(RANKS * shard, []).append(f"%in{shard}")
    lines.append("  %c = coll.comm_world : !coll.comm<4>")
    pending = []  # (future, type, result size, kind)
    for _ in range(rng.randint(8, 40)):
        choice = rng.random()
        if choice < 0.2:
            shard = rng.choice(SHARDS)
            f = fresh("f")
            lines.append(f"  {f} = coll.all_gather_start %sh{shard} on %c gather_axis = 0 : "
                         f"(tensor<{shard}xf32>, !coll.comm<4>) -> !coll.future<tensor<{RANKS * shard}xf32>>")
            pending.append((f, RANKS * shard, "gather"))
        elif choice < 0.35:
            shard = rng.choice(SHARDS)
            src = rng.choice(values[RANKS * shard])
            f = fresh("r")
            lines.append(f"  {f} = coll.reduce_scatter_start {src} on %c scatter_axis = 0 reduction = <avg> : "
                         f"(tensor<{RANKS * shard}xf32>, !coll.comm<4>) -> !coll.future<tensor<{shard}xf32>>")
            pending.append((f, shard, "scatter"))
        elif choice < 0.5 and pending:
            f, size, kind = pending.pop(rng.randrange(len(pending)))
            w = fresh("w")
            lines.append(f"  {w} = coll.wait {f} : !coll.future<tensor<{size}xf32>>")
            values.setdefault(size, []).append(w)
        else:
            size = rng.choice(sorted(values))
            e, y = fresh("e"), fresh("y")
            lines.append(f"  {e} = tensor.empty() : tensor<{size}xf32>")
            if rng.random() < 0.5:
                x = rng.choice(values[size])
                lines.append(f"  {y} = linalg.exp ins({x} : tensor<{size}xf32>) outs({e} : tensor<{size}xf32>) "
                             f"-> tensor<{size}xf32>")
            else:
                x, z = rng.choice(values[size]), rng.choice(values[size])
                lines.append(f"  {y} = linalg.add ins({x}, {z} : tensor<{size}xf32>, tensor<{size}xf32>) "
                             f"outs({e} : tensor<{size}xf32>) -> tensor<{size}xf32>")
            values[size].append(y)
    for f, size, _ in pending:
        w = fresh("w")
        lines.append(f"  {w} = coll.wait {f} : !coll.future<tensor<{size}xf32>>")
        values.setdefault(size, []).append(w)
    results = [vs[-1] for _, vs in sorted(values.items())]
    types = [f"tensor<{size}xf32>" for size, _ in sorted(values.items())]
    signature = ", ".join(f"{name}: tensor<{size}xf32>" for name, size in args)
    return (f"func.func @f({signature}) -> ({', '.join(types)}) {{\n" + "\n".join(lines) +
            f"\n  return {', '.join(results)} : {', '.join(types)}\n}}\n")


def report(path, passes, tmp):
    out = os.path.join(tmp, "r.json")
    proc = subprocess.run([find_tool("loom-opt"), path, *passes,
                           f"--coll-report=device=cpu json={out} check-tracker=true", "-o", os.devnull],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    with open(out) as f:
        return json.load(f)


rng = random.Random(20261122)
failures = 0
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "dag.mlir")
    for index in range(300):
        with open(path, "w") as f:
            f.write(random_dag(rng))
        try:
            base = report(path, [], tmp)
            for passes in (["--coll-overlap-schedule=device=cpu"], ["--coll-prefetch=device=cpu"], ["--coll-prefetch=overtake=false"]):
                got = report(path, passes, tmp)
                if got["peak_bytes"] > base["peak_bytes"]:
                    raise RuntimeError(f"{passes[0]}: peak {got['peak_bytes']} > {base['peak_bytes']}")
                if got["makespan_us"] > base["makespan_us"] * (1 + 1e-9) + 1e-6:
                    raise RuntimeError(f"{passes[0]}: makespan {got['makespan_us']} > {base['makespan_us']}")
        except RuntimeError as err:
            failures += 1
            if failures <= 3:
                print(f"FAIL dag {index}: {err}")
                with open(path) as f:
                    print(f.read())
print(f"300 random DAGs: {'all verify, peak <= original, makespan <= original' if not failures else f'FAIL {failures}'}")
sys.exit(1 if failures else 0)
