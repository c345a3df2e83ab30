#!/usr/bin/env python3
"""Integration tests of compiled trainers, run by ctest (see CMakeLists.txt).

    trainers.py build        compile the trainers the other tests share
    trainers.py equal        1 rank vs 2 and 4 ranks with ZeRO-1/2/3: same losses;
                             every trainer's measured peak = plan = timeline;
                             vector loops give the scalar loops' bits; the
                             loss fused in chunks gives the unfused losses;
                             the CUDA kernel mapping run on the CPU gives
                             the CPU trainer's bits; fused attention gives
                             the decomposed attention's losses, and the
                             loss's row kernels the unfused losses; bf16
                             follows f32 (on 1 rank and with ZeRO-3 on 2),
                             and its CUDA mapping run on the CPU gives its
                             bits
    trainers.py resume       stop at 10, resume: steps 11-20 equal bit for bit
                             (and in bf16)
    trainers.py reshard      a 4-rank checkpoint resumes on 2 ranks
    trainers.py pipeline     2 and 4 pipeline stages, 4 and 8 microbatches,
                             GPipe, 1F1B and ZB-H1: one rank's losses and
                             final state within 1e-5; a 2-stage checkpoint
                             resumes on 4 stages and on one rank
    trainers.py torch        step 0's loss and gradients against PyTorch
    trainers.py cpu          a trainer built for a CPU feature the host lacks
                             says so and exits 1; one built for x86-64-v2
                             follows the native build's losses
    trainers.py data         the same tokens as bytes, raw uint16 and uint32
                             ids, llm.c shards and a .npy array: the same
                             losses bit for bit; a token at or above the
                             vocabulary (1 rank, ZeRO-3, a pipeline's
                             stages), a file shorter than a step and a
                             .bin without a header are errors saying where
    trainers.py weights      weights in and out: the reference safetensors file
                             reads back and is written byte for byte; a
                             trainer started with --init from outside weights
                             (1 rank, ZeRO-3 on 4) has PyTorch's loss on
                             them, and its exported checkpoint gives PyTorch
                             the loss Loom's next step reports
    trainers.py eval         loomc --eval: the held-out loss (--data-split,
                             --val-data) every K steps is PyTorch's on the
                             checkpointed weights, the same on 1 rank, on
                             ZeRO-3 over 4 and on pipeline stages (with
                             replicas), and leaves training's losses as they
                             are, bit for bit
    trainers.py bad-input    each bad input ends with its message, never a hang
    trainers.py durable      killed at every point of writing a checkpoint, at
                             random times, on 2 ranks: `latest` is always
                             whole and the resumed run is bit-identical; a
                             full disk is an error that loses nothing;
                             every rename comes after an fsync (strace);
                             devices are written in place

Every trainer is the tiny Llama built by loom.models.llama (in f32, or
bf16 where named), with the same global batch of 4 sequences: 1 rank x 4,
2 ranks x 2 or 4 ranks x 1. Work
goes to --dir (default: build/test/trainers).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import math
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import time

from harness import CORPUS, ROOT, Check, mpi_env, relative_errors  # noqa: E402
from loom.models.llama import CONFIGS, build_forward  # noqa: E402
from loom.opt import find_tool  # noqa: E402

STEPS = 20
LR = 0.01
# (name, ranks, zero stage, optimizer)
TRAINERS = [("r1", 1, 0, "adamw"), ("r1-sgd", 1, 0, "sgd"),
            ("r2-z1", 2, 1, "adamw"), ("r2-z2", 2, 2, "adamw"), ("r2-z3", 2, 3, "adamw"),
            ("r4-z1", 4, 1, "adamw"), ("r4-z2", 4, 2, "adamw"), ("r4-z3", 4, 3, "adamw")]
# loomc fuses the loss in chunks of 256 tokens by default, so these steps
# (at most 128 tokens) keep their logits. The 1-rank trainer again with
# scalar loops (--vectorize=false), which must not change a bit, and with
# the loss fused in chunks of 32 tokens and blocks of 64 of the 256
# vocabulary entries: the same losses within 1e-5. And with the CUDA
# target's kernel mapping (gpu-map-linalg) run on the CPU
# (--emulate-gpu): with a thread per output element every sum runs in the
# CPU's order, so the same bits; with a block of 32 threads per row for
# every reduction of 32 or more (softmax, RMSNorm, the loss's log-sum-exp),
# each thread folds every 32nd element and the partials are combined after,
# with the norms' weight gradients split into partials of 8 tokens then
# combined (gpu-split-reduction), and with elementwise producers fused
# into their consumers: within 1e-5.
SCALAR = ("r1-scalar", 1, 0, "adamw")
CHUNKED = ("r1-chunked", 1, 0, "adamw")
GPU_MAPPED = ("r1-gpu-mapped", 1, 0, "adamw")
GPU_BLOCKS = ("r1-gpu-blocks", 1, 0, "adamw")
# Attention decomposed to linalg (seq x seq scores) instead of the runtime's
# fused kernels: the same losses within 1e-5.
PLAIN_ATTENTION = ("r1-plain-attention", 1, 0, "adamw")
# The loss fused in chunks of 32 tokens, each chunk's log-sum-exp, loss and
# gradient by the runtime's row kernels (--loss-kernels), and the embedding
# gradient by its scatter-add (--embedding-kernel): the unfused losses within
# 1e-5, and the planned memory exactly (the gradient kernel works in place).
LOSS_KERNELS = ("r1-loss-kernels", 1, 0, "adamw")
# The same model in bf16 (parameters, optimizer state and activations;
# f32 arithmetic, accumulators and logits): its losses follow f32's within
# a few bf16 roundings.
BF16 = ("r1-bf16", 1, 0, "adamw")
BF16_Z3 = ("r2-z3-bf16", 2, 3, "adamw")
# The CUDA target's mapping of the bf16 step (16-byte vectors: 8 bf16 lanes)
# run on the CPU: the CPU bf16 trainer's bits.
BF16_GPU_MAPPED = ("r1-bf16-gpu-mapped", 1, 0, "adamw")
# A larger batch (8 sequences of 128 tokens: an 8 MiB plan) for the memory
# test, where a per-step arena would show in the resident set.
MEMORY = ("r1-b8-s128", 1, 0, "adamw")
# Rematerialised (loomc --remat-budget-mb, train-remat's ILP) against the
# same model kept whole: the 1-rank memory model, and 4 ranks of ZeRO-3
# with 2 sequences of 128 tokens each, where activations dominate the peak.
# The budgets lie between the smallest peak train-remat reaches and the
# keep-all plan (9.33 MB on 1 rank, 2.9 MB a rank on 4).
R4_S128 = ("r4-z3-s128", 4, 3, "adamw")
REMAT_R1 = ("r1-b8-s128-remat", 1, 0, "adamw")
REMAT_R4 = ("r4-z3-s128-remat", 4, 3, "adamw")
REMAT = {REMAT_R1: (MEMORY, 8.0), REMAT_R4: (R4_S128, 2.3)}
# The same 4-rank ZeRO-3 step under --memory-limit-mb: from just above the
# synchronous order's plan (2.58 MiB by the scheduler's figure) to above the
# default schedule's (2.70 MiB).
LIMITS = {("r4-z3-s128-limit" + str(mb), 4, 3, "adamw"): mb for mb in (2.6, 2.7, 2.8)}
EXTRA_FLAGS = {SCALAR: ["--vectorize=false"],
               CHUNKED: ["--fuse-cross-entropy=32", "--fuse-cross-entropy-vocab=64"],
               GPU_MAPPED: ["--emulate-gpu", "--gpu-block-reduce=0", "--gpu-fuse-elementwise"],
               GPU_BLOCKS: ["--emulate-gpu", "--gpu-block-reduce=32", "--gpu-threads=32",
                            "--gpu-fuse-elementwise", "--gpu-split-min-rows=32",
                            "--gpu-split-reduction=8"],
               PLAIN_ATTENTION: ["--fuse-attention=false"],
               LOSS_KERNELS: ["--fuse-cross-entropy=32", "--loss-kernels",
                              "--embedding-kernel"],
               BF16: [], BF16_Z3: [], MEMORY: [], R4_S128: [],
               REMAT_R1: [f"--remat-budget-mb={REMAT[REMAT_R1][1]}"],
               REMAT_R4: [f"--remat-budget-mb={REMAT[REMAT_R4][1]}"],
               BF16_GPU_MAPPED: ["--emulate-gpu", "--gpu-block-reduce=0",
                                 "--gpu-fuse-elementwise"],
               **{spec: [f"--memory-limit-mb={mb}"] for spec, mb in LIMITS.items()}}
FORWARD = {BF16: "tiny-b4-bf16.mlir", BF16_Z3: "tiny-b2-bf16.mlir",
           BF16_GPU_MAPPED: "tiny-b4-bf16.mlir", MEMORY: "tiny-b8-s128.mlir",
           REMAT_R1: "tiny-b8-s128.mlir", R4_S128: "tiny-b2-s128.mlir",
           REMAT_R4: "tiny-b2-s128.mlir",
           **{spec: "tiny-b2-s128.mlir" for spec in LIMITS}}
MPI_ENV = mpi_env(20)
check = Check()


def build(work: str) -> None:
    os.makedirs(work, exist_ok=True)
    loomc = find_tool("loomc")

    def one(spec):
        name, ranks, stage, optimizer = spec
        forward = os.path.join(work, FORWARD.get(spec, f"tiny-b{4 // ranks}.mlir"))
        exe = os.path.join(work, name)
        lr = 1.0 if optimizer == "sgd" else LR
        cmd = [loomc, forward, "--world-size", str(ranks), "--zero-stage", str(stage),
               "--optimizer", optimizer, "--lr", str(lr), "-O1", "-o", exe]
        cmd += EXTRA_FLAGS.get(spec, [])
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        return name, proc, time.perf_counter() - start

    for batch in (1, 2, 4):
        cfg = dataclasses.replace(CONFIGS["tiny"], batch=batch)
        with open(os.path.join(work, f"tiny-b{batch}.mlir"), "w") as f:
            f.write(build_forward(cfg))
    for spec, batch in ((MEMORY, 8), (R4_S128, 2)):
        with open(os.path.join(work, FORWARD[spec]), "w") as f:
            f.write(build_forward(dataclasses.replace(CONFIGS["tiny"], batch=batch, seq=128)))
    for spec, batch in ((BF16, 4), (BF16_Z3, 2)):
        with open(os.path.join(work, FORWARD[spec]), "w") as f:
            f.write(build_forward(dataclasses.replace(CONFIGS["tiny"], batch=batch,
                                                      dtype="bf16")))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for name, proc, seconds in pool.map(one, TRAINERS + list(EXTRA_FLAGS)):
            check(proc.returncode == 0, f"loomc {name} ({seconds:.1f} s)")
            if proc.returncode:
                print(proc.stderr)


def run(work, name, ranks, *args, expect_fail=False, env=None, timeout=900):
    """Runs trainer `name`; the time-out guards against a hang only (a loaded
    machine may take many times as long as an idle one) and says so."""
    cmd = [os.path.join(work, name), "--data", CORPUS, *args]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), *cmd]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **MPI_ENV, **(env or {})})
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{' '.join(cmd)} timed out after {timeout} s (a hang guard)")
    if not expect_fail and proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def remove(path: str) -> None:
    """Logs are appended to on --resume: each test starts without them."""
    if os.path.exists(path):
        os.remove(path)


def losses(log: str) -> list[float]:
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f]


def check_memory(name: str, log: str) -> bool:
    """Measured against planned. The measurement is the process heap's
    high-water during each step (every malloc of the process: the step's,
    the runtime kernels' scratch, BLAS's, MPI's) above what the process held
    for itself before its first step; it must lie within 5% above the plan
    plus that step's named lines the plan does not include, each counted on
    its own (step_lines): the runtime kernels' scratch (OpenBLAS's per-call
    job arrays and the bf16 GEMMs' widening buffers among it), the most the
    communication thread held (Open MPI's reduce-scatter temporaries, bf16
    widening, the pools it keeps), the most the threads MPI and BLAS start
    for themselves held, the runtime's tables of the collectives in flight
    and what the trainer holds from between steps. A block stays on the
    line that allocated it until it is freed, so the lines do not trade
    bytes from step to step.
    The step's own allocations, counted, equal
    the plan exactly, and the plan is the memory timeline's peak plus what
    the arena's packing leaves unused above the most arena bytes live at
    once (usually nothing; named when not, at most 5% of the arena)."""
    with open(log) as f:
        rows = [json.loads(line) for line in f]
    row = rows[-1]
    predicted, planned = int(row["predicted_peak_bytes"]), int(row["planned_peak_bytes"])
    arena, bound = int(row["planned_arena_bytes"]), int(row["planned_arena_bound_bytes"])
    counted = {r["step_alloc_peak_bytes"] for r in rows}
    check(counted == {planned} and planned == predicted + (arena - bound)
          and 0 <= arena - bound <= 0.05 * arena,
          f"{name}: the step's counted allocations {sorted(counted)} = plan {planned} = "
          f"timeline {predicted} + packing {arena - bound} (arena {arena}, live bound {bound})")
    untracked = max(r["untracked_blocks"] for r in rows)
    check(untracked == 0, f"{name}: every block's line is known ({untracked} untracked)")
    compute_thread(name, rows, planned)
    # Step by step: each step's heap against that step's lines.
    fits = [(r["peak_bytes"], planned + sum(step_lines(r).values())) for r in rows]
    measured, expected = max(fits, key=lambda f: f[0] / f[1])
    least = min(r["peak_bytes"] for r in rows)
    most = {what: max(step_lines(r)[what] for r in rows) for what in step_lines(row)}
    named = ", ".join(f"{what} {bytes:,}" for what, bytes in most.items() if bytes)
    check(planned <= least and all(m <= 1.05 * e for m, e in fits),
          f"{name}: heap measured {least:,}-{max(f[0] for f in fits):,} bytes, at most "
          f"{measured / expected:.4f}x its step's plan {planned:,} + lines (at most: "
          f"{named or 'nothing'}); {measured / planned:.3f}x the plan alone")


def compute_thread(name: str, rows: list, planned: int) -> None:
    """The compute thread's heap outside the named lines' scopes, measured
    each step, is the plan: the step's blocks as glibc rounds them (16
    bytes a block, a page for a mapped one), give or take the few hundred
    bytes the trainer and the runtime hold there besides; and, where the
    step calls a threaded OpenBLAS GEMM itself (not through a runtime
    kernel's scope), OpenBLAS's job array: the BLAS line, probed at
    start-up."""
    for r in rows:
        over = r["compute_thread_bytes"] - planned
        blas = compute_blas(r, planned)
        check(abs(over - blas) <= glibc_rounding(planned),
              f"{name} step {r['step']}: the compute thread's heap is the plan {planned:,} + "
              f"{over:,} bytes (" + (f"OpenBLAS's job array {blas:,} and " if blas else "")
              + "glibc's rounding, within 0.2% or a page)")


def glibc_rounding(planned: int) -> float:
    """What glibc's rounding of a plan's blocks may add: 0.2% or a page."""
    return max(4096, 0.002 * planned)


def compute_blas(row: dict, planned: int) -> int:
    """The BLAS line, if the compute thread's heap above the plan is it."""
    over, blas = row["compute_thread_bytes"] - planned, row["blas_scratch_bytes"]
    return blas if blas and abs(over - blas) <= glibc_rounding(planned) else 0


def step_lines(row: dict) -> dict:
    """The lines of one step's heap the plan does not include, each measured
    on its own (a block is counted on the line that allocated it, whichever
    thread frees it). The kernels' scratch includes OpenBLAS's job arrays
    and the bf16 GEMMs' widening buffers, which the log also reports as
    probed at start-up (blas_scratch_bytes) and kept (gemm_scratch_bytes)."""
    return {"OpenBLAS's job array, outside the kernels": compute_blas(
                row, int(row["planned_peak_bytes"])),
            "MPI collectives": row["comm_scratch_bytes"],
            "MPI's and BLAS's own threads": row["other_threads_bytes"],
            "the runtime's collective tables": row["runtime_bytes"],
            "the runtime kernels' scratch": row["kernel_scratch_bytes"],
            "the trainer's own between steps": row["trainer_bytes"]}


def equal(work: str) -> None:
    def train(name, ranks):
        log = os.path.join(work, f"{name}.jsonl")
        run(work, name, ranks, "--steps", str(STEPS), "--log", log)
        check_memory(name, log)
        return losses(log)

    want = train("r1", 1)
    check(want[-1] < want[0] - 1.0, f"1 rank: the loss falls ({want[0]:.4f} -> {want[-1]:.4f})")
    # The learning rate is an input: --lr changes the updates, not step 0.
    log = os.path.join(work, "r1-lr.jsonl")
    run(work, "r1", 1, "--steps", "2", "--lr", str(2 * LR), "--log", log)
    other = losses(log)
    check(other[0] == want[0] and other[1] != want[1],
          f"--lr {2 * LR}: step 0 unchanged, step 1 {other[1]:.6f} (default lr: {want[1]:.6f})")
    scalar = train(SCALAR[0], 1)
    check(scalar == want, f"vector loops = scalar loops bit for bit ({len(want)} losses)")
    mapped = train(GPU_MAPPED[0], 1)
    check(mapped == want, f"the CUDA target's kernel mapping, run on the CPU, gives the "
          f"CPU trainer's bits ({len(want)} losses)")
    def close(spec, what):
        """SPEC's losses within 1e-5 relative of the 1-rank trainer's."""
        got = train(spec[0], 1)
        worst = max(relative_errors(got, want))
        check(len(got) == STEPS and worst <= 1e-5,
              f"{what}: {STEPS} losses within {worst:.1e} relative")

    close(GPU_BLOCKS, "and with block reductions, the norms' weight gradients split "
          "into partials and fused elementwise ops")
    close(CHUNKED, "the loss fused in 32-token chunks and 64-entry vocabulary blocks, "
          "against the unfused")
    close(LOSS_KERNELS, "the loss fused in 32-token chunks by the runtime's row kernels, the "
          "embedding gradient by its scatter-add kernel, against the unfused")
    close(PLAIN_ATTENTION, "fused attention kernels against attention decomposed to linalg")
    bf16 = train(BF16[0], 1)
    errors = relative_errors(bf16, want)
    check(len(bf16) == STEPS and sum(errors) / STEPS <= 2e-3 and max(errors) <= 1e-2,
          f"bf16 against f32: {STEPS} losses within {max(errors):.1e} relative "
          f"(mean {sum(errors) / max(len(errors), 1):.1e})")
    mapped = train(BF16_GPU_MAPPED[0], 1)
    check(mapped == bf16, f"bf16: the CUDA target's kernel mapping (vector loads), run on "
          f"the CPU, gives the CPU trainer's bits ({len(bf16)} losses)")
    # ZeRO-3 in bf16: bf16 gathers, and reduce-scatters summed in f32.
    sharded = train(BF16_Z3[0], 2)
    worst = max(relative_errors(sharded, bf16), default=1.0)
    check(len(sharded) == STEPS and worst <= 5e-3,
          f"bf16, 2 ranks, ZeRO-3: {STEPS} losses within {worst:.1e} relative of 1 rank")
    for name, ranks, stage, _ in TRAINERS[2:]:
        got = train(name, ranks)
        worst = max(relative_errors(got, want))
        check(len(got) == STEPS and worst <= 1e-5,
              f"{ranks} ranks, ZeRO-{stage}: {STEPS} losses within {worst:.1e} relative of 1 rank")


def cpu(work: str) -> None:
    """The step is compiled for a CPU and its features (by default the
    host's, as it really is: a VM that masks AVX-512 gets none), and the
    trainer checks at start that it runs on a CPU with all of them. A
    trainer built for a feature this CPU lacks exits with one line that
    names it, not by SIGILL (skipped only where the CPU has every candidate);
    one built for x86-64-v2 runs and follows the native build's losses."""
    import platform
    if platform.machine() not in ("x86_64", "AMD64"):
        print("skipped: loomc --cpu-features and the trainer's check name x86 features")
        return
    loomc = find_tool("loomc")
    forward = os.path.join(work, "tiny-b4.mlir")
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f
                      if line.startswith("flags")), [])
    # LLVM's feature names, and the kernel's in /proc/cpuinfo.
    candidates = {"avx512f": "avx512f", "avx512fp16": "avx512_fp16",
                  "amx-tile": "amx_tile", "xop": "xop"}
    lacking = next((feature for feature, flag in candidates.items()
                    if flag not in flags), None)
    if lacking is None:
        print(f"skipped: this CPU has every candidate feature ({', '.join(candidates)}), "
              "so none can be missing")
    else:
        exe = os.path.join(work, f"r1-plus-{lacking}")
        built = subprocess.run([loomc, forward, "--cpu-features", f"+{lacking}", "-O1",
                                "-o", exe], capture_output=True, text=True)
        check(built.returncode == 0, f"loomc --cpu-features=+{lacking}: {built.stderr.strip()}")
        proc = run(work, os.path.basename(exe), 1, "--steps", "2", expect_fail=True)
        lines = proc.stderr.strip().splitlines()
        # The features it implies may be listed too (+xop brings sse4a, fma4).
        listed = re.search(r"compiled for CPU features this CPU lacks: ([^ ]+) ",
                           lines[0]) if len(lines) == 1 else None
        check(proc.returncode == 1 and listed is not None and
              lacking in listed.group(1).split(","),
              f"a trainer built with +{lacking}, run on a CPU without it: exit "
              f"{proc.returncode}, {lines}")
    exe = os.path.join(work, "r1-x86-64-v2")
    built = subprocess.run([loomc, forward, "--cpu", "x86-64-v2", "-O1", "--lr", str(LR),
                            "-o", exe], capture_output=True, text=True)
    check(built.returncode == 0, f"loomc --cpu x86-64-v2: {built.stderr.strip()}")
    got, want = [], []
    for name, out in (("r1-x86-64-v2", got), ("r1", want)):
        log = os.path.join(work, f"{name}-cpu.jsonl")
        remove(log)
        run(work, name, 1, "--steps", str(STEPS), "--log", log)
        out += losses(log)
    worst = max(relative_errors(got, want), default=1.0)
    check(len(got) == STEPS and worst <= 1e-5,
          f"built for x86-64-v2: {STEPS} losses within {worst:.1e} relative of the native build")


def memory(work: str) -> None:
    """The arena is allocated once per process: over 20 steps the resident
    set stops growing after the first step (with an arena allocated and
    freed every step it grew by about one arena a step for 8 steps, glibc
    raising its mmap threshold and the heap fragmenting), and the heap
    measurement stays within 5% of the plan."""
    name = MEMORY[0]
    log = os.path.join(work, f"{name}.jsonl")
    remove(log)
    run(work, name, 1, "--steps", "20", "--log", log)
    check_memory(name, log)
    with open(log) as f:
        rss = [json.loads(line)["rss_bytes"] for line in f]
    arena = int(json.loads(open(log).readline())["planned_arena_bytes"])
    growth = max(rss[1:]) - rss[1]
    check(len(rss) == 20 and growth <= 1 << 20,
          f"{name}: the resident set grows {growth:,} bytes over steps 1-19 "
          f"(at most 1 MiB; the arena is {arena:,})")


def remat(work: str) -> None:
    """Rematerialised trainers run 20 steps with the same losses, bit for
    bit, as the same model kept whole, on 1 rank and on 4; the plan is
    within the budget and below the whole model's, the heap measurement
    within 5% of the plan (check_memory), and the heap's high-water lower
    by most of what the plan saves. Tokens/s of both, for the record."""
    for spec, (base, budget) in REMAT.items():
        name, ranks = spec[0], spec[1]
        logs = {}
        for trainer in (base[0], name):
            logs[trainer] = os.path.join(work, f"{trainer}-remat-test.jsonl")
            remove(logs[trainer])
            run(work, trainer, ranks, "--steps", "20", "--log", logs[trainer])
        rows = {t: [json.loads(line) for line in open(log)] for t, log in logs.items()}
        whole, rem = rows[base[0]], rows[name]
        check(len(rem) == 20 and losses(logs[name]) == losses(logs[base[0]]),
              f"{name}: 20 losses equal to {base[0]}'s bit for bit ({rem[-1]['loss']})")
        planned = {t: int(r[-1]["planned_peak_bytes"]) for t, r in rows.items()}
        check(planned[name] <= budget * 2**20 < planned[base[0]],
              f"{name}: plan {planned[name]:,} bytes <= budget {budget * 2**20:,.0f} < "
              f"{base[0]}'s {planned[base[0]]:,}")
        check_memory(name, logs[name])
        heap = {t: max(x["peak_bytes"] for x in r) for t, r in rows.items()}
        saved = planned[base[0]] - planned[name]
        check(heap[base[0]] - heap[name] >= 0.9 * saved,
              f"{name}: heap high-water {heap[name]:,} vs {heap[base[0]]:,} bytes: "
              f"{heap[base[0]] - heap[name]:,} less (the plans differ by {saved:,})")
        speed = {t: sum(x["tokens_per_s"] for x in r[1:]) / (len(r) - 1) for t, r in rows.items()}
        print(f"  {name}: {speed[name]:,.0f} tokens/s, {base[0]}: {speed[base[0]]:,.0f}")


def memory_limit(work: str) -> None:
    """--memory-limit-mb bounds what the trainer allocates: for each limit
    of the sweep, the step's counted allocations equal the plan, the plan is
    within the limit, and each step's process heap high-water, less that
    step's named lines the plan does not include (step_lines: MPI, its
    and BLAS's threads, the runtime's tables, the kernels' scratch, the
    trainer's own), is within it too, and so is the compute thread's heap
    outside those lines. The scheduler met each
    limit once (no remark, no second schedule); its schedule's figure bounds
    the plan."""
    for spec, mb in LIMITS.items():
        name, ranks = spec[0], spec[1]
        log = os.path.join(work, f"{name}.jsonl")
        remove(log)
        run(work, name, ranks, "--steps", "5", "--log", log)
        rows = [json.loads(line) for line in open(log)]
        limit = int(mb * 2**20)
        planned = int(rows[-1]["planned_peak_bytes"])
        counted = {r["step_alloc_peak_bytes"] for r in rows}
        check(counted == {planned} and planned <= limit,
              f"{name}: counted allocations {sorted(counted)} = plan {planned:,} <= "
              f"limit {limit:,}")
        compute_thread(name, rows, planned)
        # Step by step: each step's heap less that step's lines.
        over = max(rows, key=lambda r: r["peak_bytes"] - sum(step_lines(r).values()))
        measured, lines = over["peak_bytes"], sum(step_lines(over).values())
        check(all(r["peak_bytes"] - sum(step_lines(r).values()) <= limit for r in rows),
              f"{name}: heap high-water {measured:,} less its step's named lines {lines:,} = "
              f"{measured - lines:,} <= limit {limit:,} ({(measured - lines) / limit:.4f}x)")


# A collective start as -mlir-print-local-scope prints it: its input and
# result types and its op id.
COLL_START = re.compile(r"coll\.(all_gather|reduce_scatter|all_reduce|broadcast)_start .*"
                        r"\(tensor<(?:([0-9x]+)x)?(f32|bf16|f64)>.*"
                        r"!coll\.future<tensor<(?:([0-9x]+)x)?(?:f32|bf16|f64)>>"
                        r".*loc\(\"loom\.op\.([0-9]+)\"")
# A top-level op's id (a region's op closes on the line with its location).
OP_ID = re.compile(r"loc\(\"loom\.op\.([0-9]+)\"")


def profile(work: str) -> None:
    """The profile round trip: a 2-rank ZeRO-3 trainer writes --profile;
    its ids are the step's (every collective, with the bytes its types
    say; every matmul measured; no id the step lacks); loomc --profile
    recompiles with it into a trainer with the same losses; coll-report
    sets the device model beside the measurement; and a profile of other
    ops, or a bad --profile path, is an error."""
    name, ranks, stage, optimizer = "r2-z3", 2, 3, "adamw"
    forward = os.path.join(work, "tiny-b2.mlir")
    flags = ["--world-size", str(ranks), "--zero-stage", str(stage), "--optimizer", optimizer,
             "--lr", str(LR), "-O1"]
    prof, log = os.path.join(work, "profile.json"), os.path.join(work, "profile.jsonl")
    for path in (prof, log):
        remove(path)
    run(work, name, ranks, "--steps", "4", "--profile", prof, "--log", log)
    with open(prof) as f:
        measured = json.load(f)
    check(measured["format"] == "loom-profile" and measured["target"] == "cpu"
          and measured["world_size"] == 2 and measured["steps"] == 3,
          f"profile: {measured['target']}, {measured['world_size']} ranks, "
          f"{measured['steps']} steps (every step but the first)")

    loomc = find_tool("loomc")
    step = os.path.join(work, "profile-step.mlir")
    subprocess.run([loomc, forward, *flags, "--emit=step", "-mlir-print-debuginfo",
                    "-mlir-print-local-scope", "-o", step], check=True)
    ids, matmuls, collectives = set(), set(), {}
    element = {"f32": 4, "bf16": 2, "f64": 8}
    with open(step) as f:
        for line in f:
            if m := OP_ID.search(line):
                ids.add(m.group(1))
                if re.search(r"= linalg\.(batch_)?matmul ", line):
                    matmuls.add(m.group(1))
            if m := COLL_START.search(line):
                sizes = [math.prod(int(d) for d in (t or "1").split("x"))
                         for t in (m.group(2), m.group(4))]
                collectives[m.group(5)] = (m.group(1), max(sizes) * element[m.group(3)])
    got = {i: (c["kind"], c["bytes"]) for i, c in measured["collectives"].items()}
    check(got == collectives and len(got) > 10,
          f"profile: all {len(collectives)} collectives of the step under their ids, "
          f"kinds and bytes as the IR's types say")
    timed = set(measured["ops"]) | set(measured["fused"])
    check(timed <= ids and matmuls and matmuls <= timed,
          f"profile: {len(timed)} ops timed, every one an op of the step, all "
          f"{len(matmuls)} matmuls among them")
    in_ops = sum(measured["ops"].values())
    check(0.5 * measured["step_us"] <= in_ops + measured["waits_us"] <= measured["step_us"],
          f"profile: {in_ops:.0f} us in ops and {measured['waits_us']:.0f} us in waits "
          f"of a {measured['step_us']:.0f} us step")

    # Recompiled with the profile: the scheduler is handed it, and the
    # trainer computes the same losses (only the collectives' timing moves).
    again = os.path.join(work, "r2-z3-profiled")
    proc = subprocess.run([loomc, forward, *flags, "--profile", prof, "-v", "-o", again],
                          capture_output=True, text=True)
    check(proc.returncode == 0 and f"profile={prof}" in proc.stderr,
          "loomc --profile: the target the phases schedule on carries the profile")
    log2 = os.path.join(work, "profile-again.jsonl")
    remove(log2)
    run(work, "r2-z3-profiled", ranks, "--steps", "4", "--log", log2)
    check(losses(log2) == losses(log), "loomc --profile: the same 4 losses, bit for bit")

    report = os.path.join(work, "profile-report.json")
    proc = subprocess.run([find_tool("loom-opt"), step, f"--loom-set-target=device=cpu profile={prof}",
                           f"--coll-report=json={report}",
                           "-o", os.devnull], capture_output=True, text=True)
    check(proc.returncode == 0 and "predicted against measured" in proc.stderr,
          "coll-report: predicted against measured")
    if proc.returncode == 0:
        with open(report) as f:
            section = json.load(f)["profile"]
        rows = {c["class"]: c for c in section["classes"]}
        matmul = rows.get("matmul", {})
        check(section["measured_step_us"] == measured["step_us"]
              and matmul.get("measured_ops") == matmul.get("ops") >= len(matmuls)
              and section["simulated_step_us"] > 0,
              f"coll-report: {matmul.get('measured_ops')} of {matmul.get('ops')} matmuls "
              f"measured; step simulated {section['simulated_step_us']:.0f} us with the "
              f"profile, {section['predicted_step_us']:.0f} us by the device model, "
              f"measured {section['measured_step_us']:.0f} us")

    # A profile of other ops (every id shifted) matches nothing.
    other = os.path.join(work, "profile-other.json")
    with open(other, "w") as f:
        json.dump({**measured, "ops": {str(int(i) + 100000): t for i, t in measured["ops"].items()},
                   "fused": {}, "collectives": {}}, f)
    proc = subprocess.run([loomc, forward, *flags, "--profile", other, "--emit=step",
                           "-o", os.devnull], capture_output=True, text=True)
    check(proc.returncode != 0 and "matches none of the" in proc.stderr,
          "loomc --profile of other ops: an error")
    for args, why in ((["--profile", os.path.join(work, "no-such-dir", "p.json")],
                       "expected a file in an existing directory"),
                      (["--profile", prof, "--steps", "0"], "--profile needs --steps 1")):
        proc = run(work, name, ranks, *(["--steps", "2"] + args), expect_fail=True)
        check(proc.returncode != 0 and why in proc.stderr, f"trainer {' '.join(args)}: {why}")


def resume(work: str) -> None:
    full, part = os.path.join(work, "ckpt-full"), os.path.join(work, "ckpt-part")
    for d in (full, part):
        shutil.rmtree(d, ignore_errors=True)
        remove(f"{d}.jsonl")
    run(work, "r4-z3", 4, "--steps", "20", "--log", f"{full}.jsonl", "--checkpoint", full)
    run(work, "r4-z3", 4, "--steps", "10", "--log", f"{part}.jsonl", "--checkpoint", part)
    run(work, "r4-z3", 4, "--steps", "10", "--log", f"{part}.jsonl", "--checkpoint", part,
        "--resume")
    a, b = losses(f"{full}.jsonl"), losses(f"{part}.jsonl")
    check(len(b) == 20 and a == b, "stop at 10 and resume: steps 11-20 equal bit for bit")
    same = all(open(os.path.join(full, "step-20", f), "rb").read() ==
               open(os.path.join(part, "step-20", f), "rb").read()
               for f in os.listdir(os.path.join(full, "step-20")))
    check(same, "and the final checkpoints are byte-identical")
    manifest = json.load(open(os.path.join(full, "step-20", "manifest.json")))
    check(manifest["step"] == 20 and manifest["world_size"] == 4 and
          len(manifest["tensors"]) == 21 + 43,
          "the manifest names 21 parameters and 43 state tensors at step 20")
    # bf16 state is saved as f32 (exactly) and rounded back on --resume.
    full, part = os.path.join(work, "ckpt-bf16-full"), os.path.join(work, "ckpt-bf16-part")
    for d in (full, part):
        shutil.rmtree(d, ignore_errors=True)
        remove(f"{d}.jsonl")
    run(work, BF16_Z3[0], 2, "--steps", "6", "--log", f"{full}.jsonl")
    run(work, BF16_Z3[0], 2, "--steps", "3", "--log", f"{part}.jsonl", "--checkpoint", part)
    run(work, BF16_Z3[0], 2, "--steps", "3", "--log", f"{part}.jsonl", "--checkpoint", part,
        "--resume")
    a, b = losses(f"{full}.jsonl"), losses(f"{part}.jsonl")
    check(len(b) == 6 and a == b, "bf16, ZeRO-3: stop at 3 and resume: steps 4-6 equal bit for bit")


def reshard(work: str) -> None:
    full, ckpt = os.path.join(work, "ckpt-full"), os.path.join(work, "ckpt-4to2")
    shutil.rmtree(ckpt, ignore_errors=True)
    remove(f"{ckpt}.jsonl")
    if not os.path.exists(os.path.join(full, "step-20")):
        remove(f"{full}.jsonl")
        run(work, "r4-z3", 4, "--steps", "20", "--log", f"{full}.jsonl", "--checkpoint", full)
    run(work, "r4-z3", 4, "--steps", "10", "--checkpoint", ckpt)
    run(work, "r2-z3", 2, "--steps", "10", "--log", f"{ckpt}.jsonl", "--checkpoint", ckpt,
        "--resume")
    want, got = losses(f"{full}.jsonl")[10:], losses(f"{ckpt}.jsonl")
    worst = max(relative_errors(got, want))
    check(len(got) == 10 and worst <= 1e-5,
          f"a 4-rank checkpoint resumes on 2 ranks: steps 11-20 within {worst:.1e} relative")


# Pipelines (loomc --pipeline-stages): the tiny Llama with 8 sequences a
# step, against the same model on one rank. (stages, microbatches,
# schedule); each stage is one rank.
PIPELINES = [(2, 4, "gpipe"), (2, 8, "1f1b"), (2, 4, "zb-h1"), (4, 4, "1f1b"),
             (4, 8, "gpipe"), (4, 8, "zb-h1")]


def npy(path: str):
    import numpy as np
    return np.load(path)


def train_checkpointed(work, name, ranks, steps, ckpt, *extra) -> list[float]:
    """Runs trainer `name` on `ranks` ranks for `steps` steps, checkpointing
    into `ckpt` (anew, unless resuming); returns the logged losses."""
    log = os.path.join(work, f"{name}-{os.path.basename(ckpt)}.jsonl")
    remove(log)
    if "--resume" not in extra:
        shutil.rmtree(ckpt, ignore_errors=True)
    run(work, name, ranks, "--steps", str(steps), "--log", log, "--checkpoint", ckpt, *extra)
    return losses(log)


def final(ckpt: str, step: int) -> dict:
    """The checkpoint's tensors at `step`, by role and name."""
    directory = os.path.join(ckpt, f"step-{step}")
    manifest = json.load(open(os.path.join(directory, "manifest.json")))
    return {t["role"] + "." + t["name"]: npy(os.path.join(directory, t["file"]))
            for t in manifest["tensors"]}


def state_error(state: dict, want: dict) -> float:
    """The largest |a - b| / |b| of the tensors, in norm (inf if any is
    missing): single elements whose gradient is near zero can take Adam
    steps of either sign when sums are added in another order."""
    import numpy as np
    if set(state) != set(want):
        return math.inf
    return max((float(np.linalg.norm(state[k] - v) / max(np.linalg.norm(v), 1e-30))
                for k, v in want.items()), default=math.inf)


def stage_heaps(log: str, stages: int) -> list:
    """Each stage's heap high-water against its plan: (fits, heap / plan,
    what MPI held). The heap (every malloc, measured by the stage itself)
    must lie within 5% above the plan plus the most MPI held during the
    step, on the communication thread (messages that arrived before their
    receive was posted, the pools kept for them, a collective's
    temporaries) and on the threads it starts for itself: named lines, each
    measured, so that a loaded machine, where more messages arrive early,
    measures more of both and the check still holds; the runtime's
    tables of the transfers in flight; the runtime kernels' scratch; and
    the trainer's own between steps. Step by step: each step's heap against
    that step's lines."""
    rows = [json.loads(line) for line in open(log)]
    fits = []
    for s in range(stages):
        figures = [r["stages"][s] for r in rows]
        plan = figures[-1]["planned_peak_bytes"]
        lines = [f["comm_scratch_bytes"] + f["other_threads_bytes"] + f["runtime_bytes"]
                 + f["kernel_scratch_bytes"] + f["trainer_bytes"] for f in figures]
        fit = all(plan <= f["peak_bytes"] <= 1.05 * plan + line
                  for f, line in zip(figures, lines))
        fits.append((fit, max(f["peak_bytes"] for f in figures) / plan, max(lines)))
    return fits


def pipeline(work: str) -> None:
    """Pipelined trainers (2 and 4 stages, 4 and 8 microbatches, every
    schedule) run 20 steps with the single-rank trainer's losses and final
    parameters and optimizer state within 1e-5 relative; a 2-stage
    checkpoint resumes on 4 stages and on one rank."""
    import numpy as np
    loomc = find_tool("loomc")
    forward = os.path.join(work, "tiny-b8-pp.mlir")
    with open(forward, "w") as f:
        f.write(build_forward(dataclasses.replace(CONFIGS["tiny"], batch=8)))

    def compile_one(spec):
        stages, micro, schedule = spec
        name = f"pp{stages}-m{micro}-{schedule}" if stages else "pp-reference"
        cmd = [loomc, forward, "--lr", str(LR), "-O1", "-o", os.path.join(work, name)]
        if stages:
            cmd += ["--world-size", str(stages), "--pipeline-stages", str(stages),
                    "--microbatches", str(micro), "--pipeline-schedule", schedule]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        check(proc.returncode == 0, f"loomc {name}")
        if proc.returncode:
            print(proc.stderr)
        return name

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        names = list(pool.map(compile_one, [(0, 1, "")] + PIPELINES))
    reference, trainers = names[0], names[1:]

    def train(name, ranks, steps, ckpt, *extra):
        return train_checkpointed(work, name, ranks, steps, ckpt, *extra)

    base_ckpt = os.path.join(work, "pp-ckpt-reference")
    want = train(reference, 1, STEPS, base_ckpt)
    want_state = final(base_ckpt, STEPS)
    by_microbatches = {}
    for (stages, micro, schedule), name in zip(PIPELINES, trainers):
        ckpt = os.path.join(work, f"pp-ckpt-{name}")
        got = train(name, stages, STEPS, ckpt)
        state = final(ckpt, STEPS)
        worst_loss = max(relative_errors(got, want)) if got else math.inf
        worst_state = state_error(state, want_state)
        check(len(got) == STEPS and worst_loss <= 1e-5 and worst_state <= 1e-5,
              f"{name}: {STEPS} losses within {worst_loss:.1e} and {len(state)} final tensors "
              f"within {worst_state:.1e} relative of one rank's")
        by_microbatches.setdefault(micro, []).append((name, got, state))
        fits = stage_heaps(os.path.join(work, f"{name}-{os.path.basename(ckpt)}.jsonl"), stages)
        check(len(fits) == stages and all(f[0] for f in fits),
              f"{name}: each stage's heap high-water within 5% above its plan plus what "
              f"MPI held (" + ", ".join(f"{f[1]:.3f} with {f[2] / 1024:.0f} KiB"
                                                for f in fits) + ")")
    # The schedule and the stage count change where each op runs, not what
    # it computes: with the same microbatches, the same bits.
    for micro, runs in by_microbatches.items():
        first = runs[0]
        same = all(r[1] == first[1] and all(np.array_equal(r[2][k], first[2][k]) for k in first[2])
                   for r in runs[1:])
        check(same, f"{micro} microbatches: {', '.join(r[0] for r in runs)} "
                    "give the same losses and final state bit for bit")

    # A 2-stage checkpoint at step 10 resumes on 4 stages and on one rank.
    part = os.path.join(work, "pp-ckpt-part")
    train(trainers[1], 2, 10, part)
    for name, ranks in ((trainers[3], 4), (reference, 1)):
        resumed = os.path.join(work, f"pp-ckpt-resumed-{ranks}")
        shutil.rmtree(resumed, ignore_errors=True)
        shutil.copytree(part, resumed)
        got = train(name, ranks, 10, resumed, "--resume")
        worst = max(relative_errors(got, want[10:])) if got else math.inf
        check(len(got) == 10 and worst <= 1e-5,
              f"a 2-stage checkpoint resumes on {name}: steps 11-20 within {worst:.1e}")


# (stages, replicas, ZeRO stage, microbatches, schedule) of the grids.
GRIDS = [(2, 2, 1, 4, "1f1b"), (2, 2, 2, 4, "zb-h1"), (2, 2, 2, 2, "gpipe"), (4, 2, 2, 4, "1f1b")]


def pipeline_replicas(work: str) -> None:
    """Pipeline stages x data-parallel ZeRO replicas (rank s * D + d runs
    stage s of replica d): 20 steps with the losses and final parameters and
    optimizer state of the data-parallel trainer on D ranks (the same ZeRO
    stage and microbatches, each replica its own batch) within 1e-5
    relative; each stage's heap within its plan; a grid's checkpoint resumes
    on the data-parallel trainer and back."""
    loomc = find_tool("loomc")
    forward = os.path.join(work, "tiny-b4-grid.mlir")
    with open(forward, "w") as f:
        f.write(build_forward(dataclasses.replace(CONFIGS["tiny"], batch=4)))

    def compile_one(spec):
        stages, replicas, zero, micro, schedule = spec
        name = (f"grid{stages}x{replicas}-z{zero}-m{micro}-{schedule}" if stages
                else f"dp{replicas}-z{zero}-m{micro}")
        cmd = [loomc, forward, "--lr", str(LR), "-O1", "-o", os.path.join(work, name),
               "--zero-stage", str(zero), "--microbatches", str(micro),
               "--world-size", str(max(stages, 1) * replicas)]
        if stages:
            cmd += ["--pipeline-stages", str(stages), "--pipeline-schedule", schedule]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        check(proc.returncode == 0, f"loomc {name}")
        if proc.returncode:
            print(proc.stderr)
        return name

    references = sorted({(0, r, z, m, "") for _, r, z, m, _ in GRIDS})
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        names = dict(zip(references + GRIDS, pool.map(compile_one, references + GRIDS)))
    expected = {}
    for spec in references:
        ckpt = os.path.join(work, f"grid-ckpt-{names[spec]}")
        expected[spec] = (train_checkpointed(work, names[spec], spec[1], STEPS, ckpt),
                          final(ckpt, STEPS))
    for spec in GRIDS:
        stages, replicas, zero, micro, _ = spec
        name = names[spec]
        want, want_state = expected[(0, replicas, zero, micro, "")]
        ckpt = os.path.join(work, f"grid-ckpt-{name}")
        got = train_checkpointed(work, name, stages * replicas, STEPS, ckpt)
        worst_loss = max(relative_errors(got, want)) if got else math.inf
        worst_state = state_error(final(ckpt, STEPS), want_state)
        check(len(got) == STEPS and worst_loss <= 1e-5 and worst_state <= 1e-5,
              f"{name}: {STEPS} losses within {worst_loss:.1e} and the final state within "
              f"{worst_state:.1e} relative of the {replicas}-rank ZeRO-{zero} trainer's")
        fits = stage_heaps(os.path.join(work, f"{name}-{os.path.basename(ckpt)}.jsonl"), stages)
        check(len(fits) == stages and all(f[0] for f in fits),
              f"{name}: each stage's heap high-water within 5% above its plan plus what "
              f"MPI held (" + ", ".join(f"{f[1]:.3f} with {f[2] / 1024:.0f} KiB"
                                                for f in fits) + ")")

    # Checkpoints name tensors whole: a grid's resumes on the data-parallel
    # trainer, and the data-parallel trainer's on a grid.
    grid, dp = GRIDS[1], (0, 2, 2, 4, "")
    want = expected[dp][0]
    for first, then, ranks in ((grid, dp, 2), (dp, grid, 4)):
        part = os.path.join(work, f"grid-ckpt-part-{names[first]}")
        train_checkpointed(work, names[first], first[1] * max(first[0], 1), 10, part)
        got = train_checkpointed(work, names[then], ranks, 10, part, "--resume")
        worst = max(relative_errors(got, want[10:])) if got else math.inf
        check(len(got) == 10 and worst <= 1e-5,
              f"{names[first]}'s checkpoint at step 10 resumes on {names[then]}: steps 11-20 "
              f"within {worst:.1e}")


def torch_reference(work: str) -> None:
    import numpy as np
    from loom.torch_reference import llama_loss
    import torch

    ckpt = os.path.join(work, "ckpt-sgd")
    shutil.rmtree(ckpt, ignore_errors=True)
    log = os.path.join(work, "sgd.jsonl")
    # SGD with lr 1: the parameters after one step are p - g.
    run(work, "r1-sgd", 1, "--steps", "1", "--log", log, "--checkpoint", ckpt,
        "--checkpoint-every", "1")
    cfg = CONFIGS["tiny"]
    names = [n for n, _ in cfg.parameters()]
    after = {n: np.load(os.path.join(ckpt, "step-1", f"param.{n}.npy")) for n in names}
    # The initial parameters: a 0-step run writes them.
    init = os.path.join(work, "ckpt-init")
    shutil.rmtree(init, ignore_errors=True)
    run(work, "r1-sgd", 1, "--steps", "0", "--checkpoint", init)
    before = {n: np.load(os.path.join(init, "step-0", f"param.{n}.npy")) for n in names}
    data = np.frombuffer(open(CORPUS, "rb").read(), np.uint8).astype(np.int64)
    seq, span = cfg.seq, len(data) - cfg.seq - 1
    starts = [(b * seq) % span for b in range(cfg.batch)]
    tokens = np.stack([data[s:s + seq] for s in starts])
    labels = np.stack([data[s + 1:s + seq + 1] for s in starts])
    weights = [torch.tensor(before[n], dtype=torch.float64, requires_grad=True) for n in names]
    loss = llama_loss(cfg, dict(zip(names, weights)), tokens, labels)
    loss.backward()
    got_loss = losses(log)[0]
    check(abs(got_loss - loss.item()) / loss.item() < 1e-5,
          f"step 0 loss {got_loss:.7f} vs PyTorch {loss.item():.7f}")
    worst = 0.0
    for n, w in zip(names, weights):
        grad = before[n].astype(np.float64) - after[n]
        ref = w.grad.numpy()
        worst = max(worst, float(np.linalg.norm(grad - ref) / max(np.linalg.norm(ref), 1e-30)))
    check(worst < 1e-3, f"21 gradients (from one SGD step, lr 1) within {worst:.1e} of PyTorch")


def bad_input(work: str) -> None:
    empty = os.path.join(work, "empty.txt")
    open(empty, "w").close()
    good, bad, mismatch = (os.path.join(work, f"ckpt-{k}") for k in ("good", "bad", "mismatch"))
    for d in (good, bad, mismatch):
        shutil.rmtree(d, ignore_errors=True)
    run(work, "r4-z3", 4, "--steps", "1", "--checkpoint", good)
    shutil.copytree(good, bad)
    shutil.copytree(good, mismatch)
    # A manifest line that does not parse, and one whose shape differs.
    with open(os.path.join(bad, "step-1", "manifest.json"), "a") as f:
        f.write('    {"name": "x", "role": "param", "file": "x.npy", "shape": [1, two]}\n')
    manifest = os.path.join(mismatch, "step-1", "manifest.json")
    text = open(manifest).read()
    wrong = text.replace('"file": "param.embed.npy", "dtype": "f32", "shape": [256, 64]',
                         '"file": "param.embed.npy", "dtype": "f32", "shape": [128, 64]')
    assert wrong != text
    open(manifest, "w").write(wrong)
    # A truncated tensor file.
    truncated = os.path.join(work, "ckpt-truncated")
    shutil.rmtree(truncated, ignore_errors=True)
    shutil.copytree(good, truncated)
    npy = os.path.join(truncated, "step-1", "param.output.npy")
    os.truncate(npy, os.path.getsize(npy) - 4)
    cases = [
        ("a missing data file", ["--steps", "1"], {"data": "/nonexistent/corpus.txt"},
         "cannot read data file /nonexistent/corpus.txt"),
        ("an empty data file", ["--steps", "1"], {"data": empty}, "holds 0 tokens (bytes)"),
        ("a corrupt checkpoint", ["--steps", "1", "--checkpoint", bad, "--resume"], {},
         "corrupt manifest line"),
        ("a mismatched checkpoint", ["--steps", "1", "--checkpoint", mismatch, "--resume"], {},
         "has shape 128x64"),
        ("a truncated checkpoint tensor", ["--steps", "1", "--checkpoint", truncated, "--resume"],
         {}, "param.output.npy: truncated data"),
        ("no checkpoint to resume", ["--steps", "1", "--checkpoint",
                                     os.path.join(work, "nothing-here"), "--resume"], {},
         "no checkpoint in"),
        ("the wrong world size", ["--steps", "1"], {"ranks": 2}, "compiled for 4 ranks but runs on 2"),
        ("a rank that dies", ["--steps", "3"], {"env": {"LOOM_TRAINER_DIE": "2:1"}}, ""),
        ("a rank that stops answering", ["--steps", "3"],
         {"env": {"LOOM_TRAINER_STALL": "1:1", "LOOMRT_TIMEOUT_S": "3"}},
         "did not finish in 3 s"),
        ("an unknown flag", ["--stpes", "3"], {}, "unknown flag '--stpes'"),
        ("a bad learning rate", ["--lr", "fast"], {}, "--lr expects a positive number, got 'fast'"),
    ]
    for what, args, opts, message in cases:
        cmd_args = list(args)
        start = time.perf_counter()
        data = opts.get("data")
        proc_args = (["--data", data] if data else []) + cmd_args
        ranks = opts.get("ranks", 4)
        cmd = ["mpirun", "-np", str(ranks), os.path.join(work, "r4-z3")]
        if not data:
            cmd += ["--data", CORPUS]
        cmd += proc_args
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                                  env={**os.environ, **MPI_ENV, **opts.get("env", {})})
            out = proc.stdout + proc.stderr
            ok = proc.returncode != 0 and message in out
            seconds = time.perf_counter() - start
            check(ok, f"{what}: exit {proc.returncode} in {seconds:.1f} s"
                      + (f", says '{message}'" if message else ""))
            if not ok:
                print(out[-2000:])
        except subprocess.TimeoutExpired:
            check(False, f"{what}: hung for 60 s")


def expect_errors(work: str, cases) -> None:
    """Each (trainer, ranks, flags, message) run for one step ends with a
    non-zero exit and says `message`."""
    for name, ranks, args, message in cases:
        proc = run(work, name, ranks, "--steps", "1", *args, expect_fail=True, timeout=300)
        out = proc.stdout + proc.stderr
        check(proc.returncode != 0 and message in out,
              f"{name} on {ranks} rank(s), {' '.join(args)}: exit {proc.returncode}, "
              f"says '{message}'")
        if proc.returncode == 0 or message not in out:
            print(out[-2000:])


def data(work: str) -> None:
    """Token files (docs/Data.md): every format of the same ids trains the
    same; ids the model cannot read are refused before the first step."""
    import numpy as np
    ids = np.frombuffer(open(CORPUS, "rb").read(), np.uint8)

    def llmc(path, values, magic, version, dtype):
        header = np.zeros(256, np.int32)
        header[:3] = (magic, version, len(values))
        with open(path, "wb") as f:
            f.write(header.tobytes())
            f.write(values.astype(dtype).tobytes())
        return path

    def path(name):
        return os.path.join(work, name)

    ids.astype("<u2").tofile(path("corpus.u16"))
    ids.astype("<u4").tofile(path("corpus.u32"))
    np.save(path("corpus.npy"), ids.astype(np.int32).reshape(-1, 1))
    formats = {
        "bytes": [],
        "uint16": ["--data", path("corpus.u16"), "--data-format", "uint16"],
        "uint32": ["--data", path("corpus.u32"), "--data-format", "uint32"],
        "llmc (uint16)": ["--data", llmc(path("corpus-shard.bin"), ids, 20240520, 1, "<u2")],
        "llmc (uint32)": ["--data", llmc(path("corpus-shard32.bin"), ids, 20240801, 7, "<u4"),
                          "--data-format", "llmc"],
        "npy (<i4)": ["--data", path("corpus.npy")],
    }
    runs = {}
    for what, args in formats.items():
        log = path(f"data-{what.split()[0]}-{len(runs)}.jsonl")
        remove(log)
        run(work, "r2-z3", 2, "--steps", "3", "--log", log, *args)
        runs[what] = losses(log)
    want = runs["bytes"]
    check(len(want) == 3 and all(got == want for got in runs.values()),
          f"{', '.join(runs)}: the same 3 losses bit for bit")

    # One token past the vocabulary of 256, at token 1000: refused with its
    # place, by one rank, by ZeRO-3's ranks (the table is sharded, the bound
    # is the whole table's) and by a pipeline's stages (tokens on the first,
    # labels on the last).
    bad = ids.astype(np.uint16)
    bad[1000] = 300
    bad.astype("<u2").tofile(path("bad.u16"))
    shard = llmc(path("bad-shard.bin"), bad, 20240520, 1, "<u2")
    pp = os.path.join(work, "pp2-m2-data")
    proc = subprocess.run([find_tool("loomc"), os.path.join(work, "tiny-b4.mlir"), "--lr", str(LR),
                           "-O1", "--world-size", "2", "--pipeline-stages", "2",
                           "--microbatches", "2", "-o", pp], capture_output=True, text=True)
    check(proc.returncode == 0, "loomc a 2-stage pipeline")
    vocab = "is not below the model's vocabulary of 256"
    cases = [
        ("r1", 1, ["--data", path("bad.u16"), "--data-format", "uint16"],
         f"token 300 at token offset 1000 (byte 2000) {vocab}"),
        ("r2-z3", 2, ["--data", shard], f"token 300 at token offset 1000 (byte 3024) {vocab}"),
        (os.path.basename(pp), 2, ["--data", shard],
         f"token 300 at token offset 1000 (byte 3024) {vocab}"),
        # 2 ranks x 2 sequences of 32 tokens need 129.
        ("r2-z3", 2, ["--data", path("short.u16"), "--data-format", "uint16"],
         "holds 128 tokens (uint16); one step's 4 sequences of 32 need at least 129"),
        # nanoGPT's train.bin: raw uint16 ids, no header.
        ("r1", 1, ["--data", path("nanogpt.bin")], "needs --data-format uint16 or uint32"),
        ("r1", 1, ["--data", path("corpus.u16"), "--data-format", "u16"],
         "--data-format expects auto, bytes, uint16, uint32, llmc or npy, got 'u16'"),
    ]
    ids[:128].astype("<u2").tofile(path("short.u16"))
    ids.astype("<u2").tofile(path("nanogpt.bin"))
    expect_errors(work, cases)


def weights(work: str) -> None:
    """Weights in and out (docs/Weights.md)."""
    import numpy as np
    import torch
    from loom.checkpoint import (export_safetensors, from_safetensors, from_state_dict,
                                 read_checkpoint, read_safetensors, write_safetensors)
    from loom.torch_reference import llama_loss

    def path(name):
        return os.path.join(work, name)

    # A file of the reference implementation (safetensors 0.8.0's
    # safetensors.torch.save_file: I64, F32, BF16 and F16 tensors and
    # metadata) reads back, and written again gives its bytes.
    ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs",
                       "reference.safetensors")
    tensors, metadata = read_safetensors(ref)
    check(metadata == {"format": "pt"} and tensors["ids"].tolist() == [7, -1, 300]
          and tensors["layers.0.w"].tolist() == [[0, 0.25, 0.5], [0.75, 1, 1.25]]
          and tensors["norm"].to_float().tolist() == [1.0, -2.5, 0.15625, 3.0]
          and tensors["half"].tolist() == [0.5, -1.0],
          "the reference implementation's file reads back (I64, F32, BF16, F16, metadata)")
    write_safetensors(path("again.safetensors"), tensors, metadata)
    check(open(path("again.safetensors"), "rb").read() == open(ref, "rb").read(),
          "written again: the reference implementation's bytes")

    # Weights from outside (not the trainer's initialisation) as a
    # .safetensors file, made a checkpoint and trained from with --init.
    cfg = CONFIGS["tiny"]
    rng = np.random.default_rng(7)
    outside = {n: (1 + 0.1 * rng.standard_normal(shape) if n.endswith("norm")
                   else 0.1 * rng.standard_normal(shape)).astype(np.float32)
               for n, shape in cfg.parameters()}
    write_safetensors(path("outside.safetensors"), outside)
    init = path("init-outside")
    shutil.rmtree(init, ignore_errors=True)
    from_safetensors(path("outside.safetensors"), init)
    # The same weights through a PyTorch state_dict.
    init_sd = path("init-state-dict")
    shutil.rmtree(init_sd, ignore_errors=True)
    from_state_dict({n: torch.from_numpy(a) for n, a in outside.items()}, init_sd)
    _, from_sd, _ = read_checkpoint(init_sd)
    check(all(np.array_equal(from_sd[n], outside[n]) for n in outside),
          "a state_dict makes the same checkpoint")

    data = np.frombuffer(open(CORPUS, "rb").read(), np.uint8).astype(np.int64)

    def torch_loss(params, step):
        """PyTorch's loss on the global batch of `step` (docs/Runtime.md)."""
        seq, span = cfg.seq, len(data) - cfg.seq - 1
        starts = [((step * cfg.batch + b) * seq) % span for b in range(cfg.batch)]
        tokens = np.stack([data[s:s + seq] for s in starts])
        labels = np.stack([data[s + 1:s + seq + 1] for s in starts])
        p = {n: torch.tensor(a, dtype=torch.float64) for n, a in params.items()}
        return llama_loss(cfg, p, tokens, labels).item()

    want0 = torch_loss(outside, 0)
    runs = {}
    for name, ranks, start in (("r1", 1, init), ("r4-z3", 4, init_sd)):
        ckpt = path(f"weights-{name}")
        shutil.rmtree(ckpt, ignore_errors=True)
        log = path(f"weights-{name}.jsonl")
        remove(log)
        run(work, name, ranks, "--steps", "4", "--init", start, "--log", log, "--checkpoint",
            ckpt, "--checkpoint-every", "3", "--keep-checkpoints", "0")
        runs[name] = losses(log)
        got = runs[name][0]
        check(abs(got - want0) / want0 < 1e-5,
              f"{name} --init: step 0 loss {got:.7f}, PyTorch's on the weights {want0:.7f}")
        # Exported after 3 steps: PyTorch's loss on step 3's batch is the
        # loss Loom's step 3 reports (computed before its update).
        out = path(f"weights-{name}.safetensors")
        export_safetensors(os.path.join(ckpt, "step-3"), out)
        exported, meta = read_safetensors(out)
        check(set(exported) == set(outside) and meta.get("loom_step") == "3",
              f"{name}: the export holds the {len(outside)} parameters under their names")
        want3 = torch_loss(exported, 3)
        check(abs(runs[name][3] - want3) / want3 < 1e-6,
              f"{name}: PyTorch on the exported step-3 weights {want3:.7f}, "
              f"Loom's step 3 {runs[name][3]:.7f}")
    worst = max(relative_errors(runs["r4-z3"], runs["r1"]))
    check(worst <= 1e-5, f"ZeRO-3 on 4 ranks from the same weights: losses within {worst:.1e}")
    export_safetensors(os.path.join(path("weights-r1"), "step-3"), path("bf16.safetensors"),
                       dtype="BF16")
    bf16, _ = read_safetensors(path("bf16.safetensors"))
    _, f32, _ = read_checkpoint(os.path.join(path("weights-r1"), "step-3"))
    check(all(np.array_equal(bf16[n].to_float(),
                             torch.from_numpy(f32[n]).to(torch.bfloat16).float().numpy())
              for n in f32), "a BF16 export rounds as PyTorch's cast does")

    # A checkpoint whose names differ from the step's, one missing a
    # parameter, and --init with --resume are errors.
    renamed = path("init-renamed")
    shutil.rmtree(renamed, ignore_errors=True)
    from loom.checkpoint import write_checkpoint
    write_checkpoint(renamed, {("model." + n if n == "embed" else n): a
                               for n, a in outside.items()})
    missing = path("init-missing")
    shutil.rmtree(missing, ignore_errors=True)
    write_checkpoint(missing, {n: a for n, a in outside.items() if n != "output"})
    cases = [
        (["--init", renamed], "has 1 parameter(s) the step does not: 'model.embed'"),
        (["--init", missing], "has no param 'output'"),
        (["--init", init, "--checkpoint", path("weights-r1"), "--resume"],
         "--init starts a run from a checkpoint's parameters and --resume continues one"),
        (["--init", path("nothing-here")], "--init: "),
    ]
    expect_errors(work, [("r1", 1, args, message) for args, message in cases])


def evaluation(work: str) -> None:
    """The evaluation step (loomc --eval, docs/Data.md)."""
    import numpy as np
    import torch
    from loom.checkpoint import read_checkpoint
    from loom.torch_reference import llama_loss

    def path(name):
        return os.path.join(work, name)

    loomc = find_tool("loomc")

    def compile_one(spec):
        name, ranks, stage = spec
        forward = path(f"tiny-b{4 // ranks}.mlir")
        cmd = [loomc, forward, "--world-size", str(ranks), "--zero-stage", str(stage),
               "--lr", str(LR), "-O1", "--eval", "-o", path(name)]
        return name, subprocess.run(cmd, capture_output=True, text=True)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for name, proc in pool.map(compile_one, [("r1-eval", 1, 0), ("r4-z3-eval", 4, 3)]):
            check(proc.returncode == 0, f"loomc --eval {name}")
            if proc.returncode:
                print(proc.stderr)
    data = np.frombuffer(open(CORPUS, "rb").read(), np.uint8)
    held = int(len(data) * 0.25)
    train_part, held_part = data[:len(data) - held], data[len(data) - held:]
    train_part.tofile(path("corpus-train.txt"))
    cfg = CONFIGS["tiny"]

    def torch_loss(params, tokens_of, batches):
        seq, span = cfg.seq, len(tokens_of) - cfg.seq - 1
        total = 0.0
        for i in range(batches):
            starts = [((i * cfg.batch + b) * seq) % span for b in range(cfg.batch)]
            ids = tokens_of.astype(np.int64)
            tokens = np.stack([ids[s:s + seq] for s in starts])
            labels = np.stack([ids[s + 1:s + seq + 1] for s in starts])
            p = {n: torch.tensor(a, dtype=torch.float64) for n, a in params.items()}
            total += llama_loss(cfg, p, tokens, labels).item()
        return total / batches

    logs = {}
    for name, ranks in (("r1-eval", 1), ("r4-z3-eval", 4)):
        ckpt, log = path(f"eval-ckpt-{name}"), path(f"eval-{name}.jsonl")
        shutil.rmtree(ckpt, ignore_errors=True)
        remove(log)
        run(work, name, ranks, "--steps", "4", "--data-split", "0.25", "--eval-every", "2",
            "--eval-batches", "2", "--log", log, "--checkpoint", ckpt, "--checkpoint-every", "2",
            "--keep-checkpoints", "0")
        rows = [json.loads(line) for line in open(log)]
        logs[name] = rows
        evaluated = [r["step"] for r in rows if "val_loss" in r]
        check(evaluated == [1, 3], f"{name}: held-out losses at steps {evaluated} (want 1 and 3)")
        for step in (2, 4):
            _, params, _ = read_checkpoint(os.path.join(ckpt, f"step-{step}"))
            want = torch_loss(params, held_part, 2)
            got = rows[step - 1].get("val_loss", math.nan)
            check(abs(got - want) / want < 1e-5,
                  f"{name}: held-out loss after {step} steps {got:.7f}, PyTorch's on the "
                  f"checkpoint {want:.7f}")
    one, four = ([r.get("val_loss", math.nan) for r in logs[n] if "val_loss" in r]
                 for n in ("r1-eval", "r4-z3-eval"))
    worst = max(relative_errors(four, one)) if len(one) == len(four) == 2 else math.inf
    check(worst <= 1e-5, f"ZeRO-3 on 4 ranks: the held-out losses within {worst:.1e} of 1 rank's")
    # Evaluating changes nothing of training: the losses of the trainer
    # without --eval on the training part alone, bit for bit.
    plain = path("eval-plain.jsonl")
    remove(plain)
    run(work, "r1", 1, "--steps", "4", "--data", path("corpus-train.txt"), "--log", plain)
    check(losses(plain) == [r["loss"] for r in logs["r1-eval"]],
          "training's losses with evaluation equal the trainer's without, bit for bit")
    # A held-out file of its own.
    held_part.tofile(path("corpus-held.txt"))
    log = path("eval-file.jsonl")
    remove(log)
    run(work, "r1-eval", 1, "--steps", "2", "--data", path("corpus-train.txt"), "--val-data",
        path("corpus-held.txt"), "--eval-batches", "2", "--log", log)
    rows = [json.loads(line) for line in open(log)]
    check([r.get("val_loss") for r in rows][:1] == [None] and
          rows[-1].get("val_loss") == logs["r1-eval"][1]["val_loss"],
          "--val-data: evaluated after the last step only, the held-out part's loss")

    cases = [
        ("r1", ["--data-split", "0.1"], "compile it with loomc --eval"),
        ("r1-eval", ["--data-split", "1.5"], "--data-split expects the held-out fraction"),
        ("r1-eval", ["--eval-every", "2"], "--eval-every and --eval-batches need held-out data"),
        ("r1-eval", ["--data-split", "0.1", "--eval-batches", "0"],
         "--eval-batches expects 1 or more batches"),
        ("r1-eval", ["--data-split", "0.1", "--val-data", CORPUS], "give one"),
        ("r1-eval", ["--data-split", "0.001"], "the held-out part of"),
        ("r1-eval", ["--data-split", "0.1", "--profile", path("eval-profile.json")],
         "--profile times the training step"),
        ("r1-eval", ["--val-data-format", "uint16"], "--val-data-format names the format"),
    ]
    expect_errors(work, [(name, 1, args, message) for name, args, message in cases])
    # Pipelines: the evaluation step is cut into the training step's
    # stages (the layout it chose), on 2 stages and on 2 stages x 2 ZeRO-2
    # replicas: the same held-out losses.
    for name, flags, ranks in (
            ("pp2-eval", ["tiny-b4.mlir", "--world-size", "2"], 2),
            ("pp2x2-eval", ["tiny-b2.mlir", "--world-size", "4", "--zero-stage", "2"], 4)):
        proc = subprocess.run([loomc, path(flags[0]), *flags[1:], "--pipeline-stages", "2",
                               "--microbatches", "2", "--lr", str(LR), "-O1", "--eval", "-o",
                               path(name)], capture_output=True, text=True)
        check(proc.returncode == 0, f"loomc --eval {name}")
        if proc.returncode:
            print(proc.stderr)
            continue
        log = path(f"eval-{name}.jsonl")
        remove(log)
        run(work, name, ranks, "--steps", "4", "--data-split", "0.25", "--eval-every", "2",
            "--eval-batches", "2", "--log", log)
        got = [json.loads(line).get("val_loss") for line in open(log)]
        got = [v for v in got if v is not None]
        worst = max(relative_errors(got, one)) if len(got) == 2 else math.inf
        check(worst <= 1e-5, f"{name}: the held-out losses within {worst:.1e} of 1 rank's")


def durable(work: str) -> None:
    """Checkpoints survive a kill anywhere, a full disk and a power loss."""
    # The reference, and an earlier run (another seed) whose checkpoints a
    # new run into the same directory replaces.
    ref, old = os.path.join(work, "durable-ref"), os.path.join(work, "durable-old")
    for d, seed in ((ref, "0"), (old, "1")):
        shutil.rmtree(d, ignore_errors=True)
        remove(f"{d}.jsonl")
        run(work, "r1", 1, "--steps", "12", "--checkpoint-every", "1", "--checkpoint", d,
            "--keep-checkpoints", "0", "--seed", seed, "--log", f"{d}.jsonl")
    want = losses(f"{ref}.jsonl")

    def identical(got_dir: str, step: int, reference: str = ref) -> bool:
        """`got_dir` holds `reference`'s checkpoint of `step`, byte for byte."""
        want_dir = os.path.join(reference, f"step-{step}")
        if not os.path.isdir(got_dir):
            return False
        names = sorted(os.listdir(want_dir))
        return sorted(os.listdir(got_dir)) == names and all(
            open(os.path.join(got_dir, n), "rb").read() ==
            open(os.path.join(want_dir, n), "rb").read() for n in names)

    def latest_step(d: str, references=(ref,)) -> int | None:
        """The step `latest` names, after checking that checkpoint is whole:
        one of `references`' byte for byte, not a mix (step-K, or step-K.old
        when the kill came between two renames); -1 if it is not."""
        latest = os.path.join(d, "latest")
        if not os.path.exists(latest):
            return None
        name = open(latest).read().strip()
        step = int(name.removeprefix("step-"))
        path = os.path.join(d, name)
        if not os.path.isdir(path):
            path += ".old"
        return step if any(identical(path, step, r) for r in references) else -1

    def leftovers(d: str) -> list[str]:
        return [n for n in os.listdir(d) if ".tmp-" in n or n.endswith(".old")]

    def finish(d: str, log: str, total: int, keep: str = "3") -> bool:
        """Resumes (or starts) the run in `d` to step `total`: the log then
        holds the reference's losses and step-`total` is the reference's."""
        step = latest_step(d)
        if step == -1:
            return False
        args = ["--checkpoint", d, "--checkpoint-every", "1", "--log", log,
                "--keep-checkpoints", keep]
        args += ["--resume", "--steps", str(total - step)] if step else ["--steps", str(total)]
        run(work, "r1", 1, *args)
        return (latest_step(d) == total and not leftovers(d) and
                losses(log) == want[:total])

    # 1. A kill at each point of writing three checkpoints, keeping two (so
    # the third prunes the first): into an empty directory, and over the
    # earlier run's checkpoints (each step replaced; `latest` names step-1,
    # the first one replaced).
    for variant in ("fresh", "replacing"):
        d, log = os.path.join(work, f"durable-{variant}"), os.path.join(work, "durable.jsonl")
        failures, points = [], 0
        for point in range(1, 80):
            shutil.rmtree(d, ignore_errors=True)
            if variant == "replacing":
                shutil.copytree(old, d)
                with open(os.path.join(d, "latest"), "w") as f:
                    f.write("step-1\n")
            remove(log)
            proc = run(work, "r1", 1, "--steps", "3", "--checkpoint-every", "1",
                       "--keep-checkpoints", "2", "--checkpoint", d, "--log", log,
                       expect_fail=True, env={"LOOM_TRAINER_KILL_AT": str(point)})
            if proc.returncode == 0:
                break
            points = point
            if proc.returncode != -9 or latest_step(d, (ref, old)) == -1:
                failures.append(f"{point}: exit {proc.returncode}")
            elif variant == "fresh" and not finish(d, log, 3, keep="2"):
                failures.append(f"{point}: the resumed run differs")
            elif variant == "replacing":
                # What `latest` names is the earlier run's or the new one's,
                # whole; a new run into d then replaces what is left.
                run(work, "r1", 1, "--steps", "3", "--checkpoint-every", "1",
                    "--keep-checkpoints", "2", "--checkpoint", d)
                if latest_step(d) != 3 or leftovers(d):
                    failures.append(f"{point}: a rerun leaves {leftovers(d)}")
        check(points >= 22 and not failures,
              f"killed at each of the {points} points of writing 3 checkpoints ({variant}): "
              "`latest` names a whole checkpoint, " +
              ("the resumed run equals the uninterrupted one bit for bit" if variant == "fresh"
               else "the earlier run's or the new one's, and a new run replaces what is left") +
              (f"; failed: {failures}" if failures else ""))

    # 2. SIGKILL at random points of a 12-step run, then resume to the end.
    # A kill's time is drawn from the run's own progress (after a random
    # number of the steps still to go, then a random part of one step), not
    # from the clock, so a slow or loaded machine kills as often as a fast
    # one: at least 10 kills, each before the run ended.
    rng, d = random.Random(26), os.path.join(work, "durable-random")
    log = os.path.join(work, "durable-random.jsonl")
    shutil.rmtree(d, ignore_errors=True)
    remove(log)
    cmd = [os.path.join(work, "r1"), "--data", CORPUS, "--checkpoint", d,
           "--checkpoint-every", "1", "--log", log]

    def logged() -> int:
        return sum(1 for _ in open(log)) if os.path.exists(log) else 0

    kills = tries = whole = 0
    while kills < 10 and tries < 40:
        step = latest_step(d)
        if step == 12:  # the run ended before a kill: start it again
            shutil.rmtree(d)
            remove(log)
            step = None
        args = ["--resume", "--steps", str(12 - step)] if step else ["--steps", "12"]
        before, after = logged(), rng.randrange(0, 12 - (step or 0))
        proc = subprocess.Popen(cmd + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        begun = time.perf_counter()
        while proc.poll() is None and logged() < before + after:
            time.sleep(0.002)
        # Within the next step: a random fraction of the time one took.
        per_step = (time.perf_counter() - begun) / max(after, 1)
        time.sleep(rng.uniform(0, per_step))
        proc.kill()
        tries += 1
        kills += proc.wait() == -9
        whole += latest_step(d) != -1
    ok = finish(d, log, 12)
    check(ok and whole == tries and kills >= 10,
          f"SIGKILL at {tries} random points ({kills} before the run ended): every `latest` "
          "whole, and steps 1-12 resumed equal the uninterrupted run bit for bit")

    # 3. Two ranks (ZeRO-3): rank 0 killed while writing; mpirun ends the job.
    d, log = os.path.join(work, "durable-r2"), os.path.join(work, "durable-r2.jsonl")
    ref2 = os.path.join(work, "durable-r2-ref")
    shutil.rmtree(ref2, ignore_errors=True)
    remove(f"{ref2}.jsonl")
    run(work, "r2-z3", 2, "--steps", "3", "--checkpoint-every", "1", "--checkpoint", ref2,
        "--log", f"{ref2}.jsonl")
    ok = True
    for point in (2, 7, 12, 18):
        shutil.rmtree(d, ignore_errors=True)
        remove(log)
        proc = run(work, "r2-z3", 2, "--steps", "3", "--checkpoint-every", "1",
                   "--checkpoint", d, "--log", log, expect_fail=True,
                   env={"LOOM_TRAINER_KILL_AT": str(point)})
        step = int(open(os.path.join(d, "latest")).read()[5:]) if os.path.exists(
            os.path.join(d, "latest")) else 0
        args = ["--resume", "--steps", str(3 - step)] if step else ["--steps", "3"]
        run(work, "r2-z3", 2, "--checkpoint", d, "--log", log, *args)
        ok &= proc.returncode != 0 and losses(log) == losses(f"{ref2}.jsonl") and all(
            open(os.path.join(d, "step-3", n), "rb").read() ==
            open(os.path.join(ref2, "step-3", n), "rb").read()
            for n in os.listdir(os.path.join(ref2, "step-3")))
    check(ok, "2 ranks, ZeRO-3: rank 0 killed at 4 points of writing; resumed bit for bit")

    # 4. A full disk: a 4 MiB tmpfs holds two of these 1.5 MB checkpoints.
    full_disk(work, identical)

    # 5. Synced before renamed: every rename's source was fsynced since its
    # last rename, and its directory after it.
    if shutil.which("strace"):
        d = os.path.join(work, "durable-strace")
        shutil.rmtree(d, ignore_errors=True)
        trace = os.path.join(work, "durable-strace.txt")
        subprocess.run(["strace", "-f", "-y", "-o", trace, "-e",
                        "trace=fsync,fdatasync,rename,renameat,renameat2",
                        os.path.join(work, "r1"), "--data", CORPUS, "--steps", "3",
                        "--checkpoint-every", "1", "--keep-checkpoints", "2",
                        "--checkpoint", d, "--trace", os.path.join(work, "durable-trace.json")],
                       capture_output=True, check=True, cwd=work)
        synced, unsynced, renames, pending = set(), [], 0, {}
        for line in open(trace):
            if m := re.search(r"fsync\(\d+<(.*)>\) = 0", line):
                synced.add(m.group(1))
                for target in [t for t, parent in pending.items() if parent == m.group(1)]:
                    del pending[target]
            elif m := re.search(r'rename\("([^"]*)", "([^"]*)"\) = 0', line):
                src, dst = (os.path.join(work, p) for p in m.groups())
                renames += 1
                # (Moving a checkpoint aside or out to be pruned is not a
                # commit: nothing new is in it.)
                if src not in synced and ".tmp-" not in os.path.basename(dst) \
                        and not dst.endswith(".old"):
                    unsynced.append(src)
                synced.discard(src)
                pending[dst] = os.path.dirname(dst)
        check(renames >= 3 * 67 and not unsynced and not pending,
              f"strace: {renames} renames, each of a file or directory fsynced before it and "
              f"followed by an fsync of its directory (unsynced {unsynced[:2]}, "
              f"directory not synced after {list(pending)[:2]})")
    else:
        print("SKIP: strace not installed: the fsync order is not checked")

    # 6. A FIFO (and so a device) is written in place, never replaced; only
    # then the machine's devices.
    fifo = os.path.join(work, "durable-fifo")
    remove(fifo)
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", fifo], stdout=subprocess.PIPE)
    run(work, "r1", 1, "--steps", "1", "--trace", fifo)
    got = reader.communicate(timeout=60)[0]
    in_place = stat.S_ISFIFO(os.stat(fifo).st_mode) and b"traceEvents" in got
    check(in_place, "--trace to a FIFO: the trace goes through it, and it stays a FIFO")
    if not in_place:
        return
    run(work, "r1", 1, "--steps", "1", "--trace", "/dev/null")
    check(stat.S_ISCHR(os.stat("/dev/null").st_mode), "--trace /dev/null: /dev/null is "
          "still a character device")
    proc = run(work, "r1", 1, "--steps", "1", "--trace", "/dev/full", expect_fail=True)
    check(proc.returncode != 0 and "cannot write /dev/full: write: No space left on device"
          in proc.stderr, f"--trace /dev/full: exit {proc.returncode}, says why")


def full_disk(work: str, identical) -> None:
    """Runs the trainer on a 4 MiB tmpfs in a private mount namespace."""
    d = os.path.join(work, "durable-full")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "disk"))
    out = os.path.join(d, "step-3")
    exe = os.path.join(work, "r1")
    script = f"""
set -u
mount -t tmpfs -o size=4m loom-full {d}/disk || exit 77
cd {d}/disk
{exe} --data {CORPUS} --steps 3 --checkpoint-every 1 --checkpoint ck > {d}/first.txt 2>&1
echo "first=$?"
echo "after=$(ls ck | tr '\n' ' ')"
rm -r ck/step-1
{exe} --data {CORPUS} --steps 1 --resume --checkpoint ck > {d}/resume.txt 2>&1
echo "resume=$?"
cp -r ck/step-3 {out}
rm -r ck
{exe} --data {CORPUS} --steps 6 --checkpoint-every 1 --keep-checkpoints 1 --checkpoint ck \
  > {d}/keep.txt 2>&1
echo "keep=$?"
echo "kept=$(ls ck | tr '\n' ' ')"
"""
    launch = (["unshare", "-r", "-m", "sh", "-c", script] if os.geteuid() != 0 or
              subprocess.run(["unshare", "-r", "-m", "true"]).returncode == 0
              else ["sh", "-c", script])
    proc = subprocess.run(launch, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **MPI_ENV})
    if proc.returncode == 77 or "first=" not in proc.stdout:
        print(f"SKIP: full disk: cannot mount a tmpfs here ({proc.stderr.strip()[-200:]})")
        return
    result = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    said = open(os.path.join(d, "first.txt")).read()
    check(result["first"] != "0" and "No space left on device" in said and
          result["after"].split() == ["latest", "step-1", "step-2"],
          f"a full disk at step 3: exit {result['first']}, says why, leaves step-1 and step-2 "
          f"and no temporary ({result['after'].strip()})")
    check(result["resume"] == "0" and identical(out, 3),
          "space freed, --resume writes step-3, the uninterrupted run's bytes")
    check(result["keep"] == "0" and result["kept"].split() == ["latest", "step-6"],
          f"--keep-checkpoints 1 runs 6 steps on the 4 MiB disk ({result['kept'].strip()})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("test", choices=["build", "equal", "memory", "memory-limit", "remat",
                                         "profile",
                                         "resume", "reshard", "pipeline", "pipeline-replicas",
                                         "torch", "data", "weights", "eval", "bad-input",
                                         "durable", "cpu"])
    parser.add_argument("--dir", default=os.path.join(ROOT, "build", "test", "trainers"))
    args = parser.parse_args()
    {"build": build, "equal": equal, "memory": memory, "memory-limit": memory_limit,
     "remat": remat, "profile": profile,
     "resume": resume,
     "reshard": reshard, "pipeline": pipeline, "pipeline-replicas": pipeline_replicas,
     "torch": torch_reference, "data": data, "weights": weights, "eval": evaluation,
     "bad-input": bad_input,
     "durable": durable,
     "cpu": cpu}[args.test](args.dir)
    print(f"{'FAIL' if check.failures else 'PASS'}: trainers.py {args.test}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
