#!/usr/bin/env python3
"""The CUDA target, run by ctest (see test/CMakeLists.txt).

On every machine:
  - loomc --target=cuda compiles the tiny Llama (1 rank, 2 ranks with
    ZeRO-3, whose step has NCCL collectives, and 1 rank in bf16) to PTX,
    ptxas -arch=sm_90 accepts every kernel module, elementwise kernels
    load and store 16-byte vectors, and (bf16) the norms' split weight
    gradients load vectors in an unrolled row loop;
  - the trainers link against the CUDA backend (cuBLAS, NCCL, cudart).
Without a GPU (or a driver) each trainer, on 1 rank and under mpirun on 2,
exits non-zero at once saying that there is no GPU.
With a GPU:
  - the CUDA trainer's losses match the CPU trainer's for 20 steps within
    1e-4 relative (f32), on 1 rank and on 2 ranks with ZeRO-3 when there
    are two GPUs, and within 1e-2 in bf16;
  - the step's measured device allocation equals the memory plan.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import re
import subprocess
import sys

from harness import CORPUS, ROOT, Check, mpi_env, relative_errors  # noqa: E402
from loom.models.llama import CONFIGS, build_forward  # noqa: E402
from loom.opt import find_tool  # noqa: E402

STEPS = 20
TOLERANCE = {"r1-bf16": 1e-2}
MPI_ENV = mpi_env(60)
check = Check()


def loomc(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([find_tool("loomc"), *args], capture_output=True, text=True)
    if proc.returncode:
        print(proc.stderr[-4000:])
    return proc


def ptxas_all(ptx: str, work: str, ptxas: str) -> tuple[int, int, list[str]]:
    """Splits loomc --emit=ptx output into its modules and assembles each;
    the number of modules, of kernels, and ptxas's errors."""
    parts = re.split(r"^// loom-module (\S+)\n", open(ptx).read(), flags=re.M)
    modules = list(zip(parts[1::2], parts[2::2]))
    os.makedirs(os.path.join(work, "ptx"), exist_ok=True)

    def one(module):
        name, text = module
        path = os.path.join(work, "ptx", name + ".ptx")
        with open(path, "w") as f:
            f.write(text)
        proc = subprocess.run([ptxas, "-arch=sm_90", path, "-o", os.devnull],
                              capture_output=True, text=True)
        return None if proc.returncode == 0 else f"{name}: {proc.stderr.strip()[:300]}"

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        errors = [e for e in pool.map(one, modules) if e]
    return len(modules), sum(text.count(".entry ") for _, text in modules), errors


def run(exe: str, ranks: int, *args: str) -> subprocess.CompletedProcess:
    cmd = [exe, "--data", CORPUS, *args]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **MPI_ENV})


def losses(log: str) -> list[dict]:
    with open(log) as f:
        return [json.loads(line) for line in f]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default=os.path.join(ROOT, "build", "test", "cuda"))
    parser.add_argument("--ptxas", default=os.environ.get("LOOM_PTXAS",
                                                          "/usr/local/cuda/bin/ptxas"))
    work = parser.parse_args().dir
    ptxas = parser.parse_args().ptxas
    os.makedirs(work, exist_ok=True)

    trainers = {}  # name -> (ranks, forward, flags)
    for name, ranks, stage, dtype in (("r1", 1, 0, "f32"), ("r2-z3", 2, 3, "f32"),
                                      ("r1-bf16", 1, 0, "bf16")):
        cfg = dataclasses.replace(CONFIGS["tiny"], batch=4 // ranks, dtype=dtype)
        forward = os.path.join(work, f"tiny-b{4 // ranks}-{dtype}.mlir")
        with open(forward, "w") as f:
            f.write(build_forward(cfg))
        # The loss fused in chunks of 32 tokens: the CUDA trainers run the
        # loss's row kernels, the CPU trainers its linalg decomposition.
        flags = ["--world-size", str(ranks), "--zero-stage", str(stage), "--lr", "0.01",
                 "--fuse-cross-entropy=32"]
        if ranks > 1:  # a block per row for every reduction of 32 or more
            flags.append("--gpu-block-reduce=32")
        if dtype == "bf16":  # the norms' weight gradients split (128 tokens)
            flags.append("--gpu-split-min-rows=32")
        trainers[name] = (ranks, forward, flags)

    for name, (ranks, forward, flags) in trainers.items():
        ptx = os.path.join(work, f"{name}.ptx")
        proc = loomc(forward, *flags, "--target=cuda", "--emit=ptx", "-o", ptx)
        check(proc.returncode == 0, f"{name}: loomc --target=cuda --emit=ptx")
        if proc.returncode == 0:
            count, kernels, errors = ptxas_all(ptx, os.path.join(work, name), ptxas)
            check(count == 1 and kernels > 0 and not errors,
                  f"{name}: one kernel module; ptxas -arch=sm_90 accepts its {kernels} kernels"
                  + "".join("\n  " + e for e in errors[:5]))
            # Elementwise kernels load and store 16-byte vectors.
            text = open(ptx).read()
            loads, stores = text.count("ld.global.v4."), text.count("st.global.v4.")
            check(loads > 0 and stores > 0,
                  f"{name}: {loads} vector loads and {stores} vector stores (ld/st.global.v4)")
            if name == "r1-bf16":
                # The split's partials: 4 bf16 columns a thread, a vector
                # load of each input a row, and the 8-row loop unrolled
                # (its bounds are constants inside the kernel).
                kernels = re.split(r"^\.visible \.entry ", text, flags=re.M)[1:]
                most = max(k.count("ld.global.v4.b16") for k in kernels)
                check(most >= 16, f"{name}: the norms' weight-gradient partials issue "
                      f"{most} bf16 vector loads in one unrolled kernel (16 expected)")
        exe = os.path.join(work, f"{name}-cuda")
        proc = loomc(forward, *flags, "--target=cuda", "-O1", "-o", exe)
        check(proc.returncode == 0 and os.access(exe, os.X_OK),
              f"{name}: the CUDA trainer links (cuBLAS, NCCL, cudart)")

    probe = run(os.path.join(work, "r1-cuda"), 1, "--steps", "1")
    if "no GPU" in probe.stderr:
        check(probe.returncode != 0,
              f"without a GPU the trainer exits {probe.returncode} saying: "
              f"{probe.stderr.strip().splitlines()[-1][:160]}")
        two = run(os.path.join(work, "r2-z3-cuda"), 2, "--steps", "1")
        check(two.returncode != 0 and two.stderr.count("no GPU") >= 1,
              f"and under mpirun -np 2 (exit {two.returncode}, no hang)")
        return 1 if check.failures else 0

    # A GPU: the CUDA trainer against the CPU trainer.
    gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    for name, (ranks, forward, flags) in trainers.items():
        if ranks > gpus.count("GPU "):
            print(f"SKIP: {name} needs {ranks} GPUs")
            continue
        cpu = os.path.join(work, f"{name}-cpu")
        check(loomc(forward, *flags, "-O1", "-o", cpu).returncode == 0, f"{name}: CPU trainer")
        rows = {}
        for kind, exe in (("cpu", cpu), ("cuda", os.path.join(work, f"{name}-cuda"))):
            log = os.path.join(work, f"{name}-{kind}.jsonl")
            if os.path.exists(log):
                os.remove(log)
            proc = run(exe, ranks, "--steps", str(STEPS), "--log", log)
            check(proc.returncode == 0, f"{name}: the {kind} trainer runs {STEPS} steps"
                  + ("" if proc.returncode == 0 else "\n" + proc.stderr[-2000:]))
            rows[kind] = losses(log) if proc.returncode == 0 else []
        want = [r["loss"] for r in rows["cpu"]]
        got = [r["loss"] for r in rows["cuda"]]
        worst = max(relative_errors(got, want), default=1.0)
        # bf16 tensors: the two GEMM libraries' f32 sums may round to
        # neighbouring bf16 values, and that difference is carried forward.
        tolerance = TOLERANCE.get(name, 1e-4)
        check(len(got) == STEPS and len(want) == STEPS and worst <= tolerance,
              f"{name}: {STEPS} CUDA losses within {worst:.1e} relative of the CPU trainer's")
        if rows["cuda"]:
            row = rows["cuda"][-1]
            check(row["peak_bytes"] == int(row["planned_peak_bytes"]),
                  f"{name}: the step's device memory {row['peak_bytes']} = plan "
                  f"{row['planned_peak_bytes']}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
