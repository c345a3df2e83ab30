#!/usr/bin/env python3
"""Runs loom-fuzz: first every past crasher (test/Fuzz/crashers, each must
now pass), then, for --seconds, libFuzzer from the seed corpus (every lit
input, and the tiny Llama's forward under each pipeline) and the corpus it
grew before, in fork mode so that it goes on after a finding.

Each finding is replayed and sorted by where it happened. Loom's: a crash,
a sanitizer report or a hang with a frame in Loom's code (statically linked
into loom-fuzz), or a pass that left invalid IR or failed silently. These
fail the run, with the input kept in WORK/artifacts and its pipeline named.
Upstream's: a crash whose every frame is in libMLIR (its parser on a mutated
text, say); these are listed, and do not fail the run.

    run_fuzz.py --fuzzer build/fuzz/bin/loom-fuzz --work DIR [--seconds 90] [--fork 1]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ENV = dict(os.environ,
           # libMLIR is not instrumented: its containers look overflowed to
           # ASan, LLVM's allocators poison memory from inline code that
           # libMLIR's copies never unpoison, and its globals are never freed.
           ASAN_OPTIONS="detect_leaks=0:detect_container_overflow=0:detect_odr_violation=0:"
                        "allow_user_poisoning=0",
           UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")


def describe(fuzzer: str, pipelines: list[str], artifact: pathlib.Path) -> None:
    data = artifact.read_bytes()
    pipeline = subprocess.run([fuzzer, "--print-pipeline-of", str(artifact)], capture_output=True,
                              text=True, env=ENV).stdout.strip()
    print(f"input: {artifact} ({len(data)} bytes)\npipeline: {pipeline}\n--- its IR ---")
    print(data[1:].decode(errors="replace")[:3000])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fuzzer", required=True)
    parser.add_argument("--work", required=True, type=pathlib.Path)
    parser.add_argument("--seconds", type=int, default=90)
    parser.add_argument("--fork", type=int, default=0, help="parallel fuzzing processes")
    parser.add_argument("--timeout", type=int, default=30, help="seconds one input may take")
    args = parser.parse_args()
    if not os.access(args.fuzzer, os.X_OK):
        print(f"error: {args.fuzzer} is not built (cmake --build build --target loom-fuzz-build)")
        return 1
    listing = subprocess.run([args.fuzzer, "--print-pipelines"], capture_output=True, text=True,
                             env=ENV, check=True).stdout
    pipelines = [line.split(" ", 1)[1] for line in listing.splitlines()]

    crashers = sorted((HERE / "crashers").iterdir())
    proc = subprocess.run([args.fuzzer, f"-timeout={args.timeout}", *map(str, crashers)],
                          capture_output=True, text=True, env=ENV)
    if proc.returncode:
        print(proc.stderr[-6000:])
        print(f"FAIL: a past crasher fails again ({len(crashers)} replayed)")
        return 1
    print(f"{len(crashers)} past crashers replayed: none fails")
    if args.seconds <= 0:
        return 0

    # The corpus grows from run to run; each run's findings have a folder.
    seeds, corpus = args.work / "seeds", args.work / "corpus"
    artifacts = args.work / "artifacts" / time.strftime("%Y%m%d-%H%M%S")
    for d in (corpus, artifacts):
        d.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(HERE / "make_seeds.py"), str(seeds),
                    "--pipelines", str(len(pipelines))], check=True, stdout=subprocess.DEVNULL)
    command = [args.fuzzer, str(corpus), str(seeds), f"-max_total_time={args.seconds}",
               f"-timeout={args.timeout}", "-rss_limit_mb=4096", "-max_len=16384",
               f"-artifact_prefix={artifacts}/", f"-fork={max(args.fork, 1)}",
               "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1"]
    proc = subprocess.run(command, capture_output=True, text=True, env=ENV)
    log = proc.stderr
    (args.work / "last-run.log").write_text(log)
    status = re.findall(r"#(\d+): cov: (\d+) ft: (\d+) corp: (\d+)", log)
    summary = (f"{status[-1][0]} inputs run, coverage {status[-1][1]} edges, "
               f"{status[-1][2]} features, corpus {status[-1][3]}" if status else "no status line")

    loom, upstream = [], []
    for artifact in sorted(artifacts.iterdir()):
        replay = subprocess.run([args.fuzzer, f"-timeout={args.timeout}", str(artifact)],
                                capture_output=True, text=True, env=ENV)
        report = replay.stderr
        if replay.returncode == 0:
            continue  # flaky (an OOM or timeout under load): not reproduced
        (loom if isLooms(report, args.fuzzer) else upstream).append((artifact, report))
    for artifact, report in upstream:
        what = re.search(r"^loom-fuzz: (upstream pass .*)$", report, re.M) or \
            re.search(r"#\d+ 0x[0-9a-f]+ in (\S+)", report)
        print(f"upstream: {artifact.name}: {what.group(1) if what else 'no frame'}")
    if loom:
        for artifact, report in loom[:3]:
            print(report[-5000:])
            describe(args.fuzzer, pipelines, artifact)
        print(f"FAIL: {len(loom)} finding(s) in Loom's code ({summary}; "
              f"{len(upstream)} in upstream MLIR)")
        return 1
    print(f"no crash, hang, invalid IR or silent failure in Loom's code in {args.seconds} s: "
          f"{summary} ({len(upstream)} finding(s) in upstream MLIR only)")
    return 0


def isLooms(report: str, fuzzer: str) -> bool:
    """Whether a replayed finding is Loom's: the pass checker's own report (but
    for invalid IR an upstream pass made of IR upstream verifiers accepted), or
    a stack frame in Loom's code (linked into the fuzzer) below the signal."""
    if re.search(r"^loom-fuzz: upstream pass ", report, re.M):
        return False
    if re.search(r"^loom-fuzz: ", report, re.M):
        return True
    binary = os.path.basename(fuzzer)
    ours = re.compile(r"#\d+ 0x[0-9a-f]+ in (\S+) .*\(.*" + re.escape(binary) + r"\+")
    harness = ("LLVMFuzzerTestOneInput", "fuzzer::", "main", "_start", "__sanitizer", "__asan",
               "__ubsan", "__interceptor", "__lsan")
    for line in report.splitlines():
        match = ours.search(line)
        if match and not match.group(1).startswith(harness):
            return True
    # UBSan names the source file of the undefined behaviour.
    return bool(re.search(r"runtime error:", report)) and "/work/" in report


if __name__ == "__main__":
    sys.exit(main())
