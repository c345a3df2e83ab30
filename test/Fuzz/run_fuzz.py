#!/usr/bin/env python3
"""Runs loom-fuzz: first every past crasher (test/Fuzz/crashers, each must
now pass), then, for --seconds, libFuzzer from the seed corpus (every lit
input, the tiny Llama's forward under each pipeline, and the steps the
microbatch, pipeline, remat and baseline-order passes take; make_seeds.py)
and the corpus it grew before, in fork mode so that it goes on after a
finding.

Each finding is replayed (up to three times) and sorted, and kept in
WORK/findings/{loom,upstream,unreproduced} with its report:

  * Loom's: the pass checker's report (a pass that left invalid IR, failed
    silently or reported an error and succeeded), a UBSan report whose
    source file is under Loom's source or build tree, or a crash, sanitizer
    report or hang with a frame in Loom's code (statically linked into
    loom-fuzz). These fail the run, with the input and its pipeline shown.
  * upstream's: a crash whose every frame is in libMLIR (its parser on a
    mutated text, say), or invalid IR an upstream pass made of IR upstream's
    verifiers accepted. These are listed, and do not fail the run.
  * unreproduced: the fuzzer stopped on it, the replays pass. It may be
    Loom's (a time limit, an order that depends on addresses), so it is
    reported with the run's error lines and fails the run too.

    run_fuzz.py --fuzzer build/fuzz/bin/loom-fuzz --work DIR [--seconds 90] [--fork 1]
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ENV = dict(os.environ,
           # libMLIR is not instrumented: its containers look overflowed to
           # ASan, LLVM's allocators poison memory from inline code that
           # libMLIR's copies never unpoison, and its globals are never freed.
           ASAN_OPTIONS="detect_leaks=0:detect_container_overflow=0:detect_odr_violation=0:"
                        "allow_user_poisoning=0",
           UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
# libFuzzer's artifact prefixes: what stopped it. Slow units are not findings.
KINDS = ("crash", "leak", "timeout", "oom", "slow-unit")


def describe(fuzzer: str, artifact: pathlib.Path) -> str:
    """The pipeline an input runs and the head of its IR."""
    data = artifact.read_bytes()
    lines = subprocess.run([fuzzer, "--print-pipeline-of", str(artifact)], capture_output=True,
                           text=True, env=ENV).stdout.splitlines()
    pipeline = lines[0] if lines else "(unknown)"
    offset = int(lines[1]) if len(lines) > 1 and lines[1].isdigit() else 1
    return (f"input: {artifact} ({len(data)} bytes)\npipeline: {pipeline}\n--- its IR ---\n"
            + data[offset:].decode(errors="replace")[:3000])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fuzzer", required=True)
    parser.add_argument("--work", required=True, type=pathlib.Path)
    parser.add_argument("--seconds", type=int, default=90)
    parser.add_argument("--fork", type=int, default=1, help="fuzzing processes (1: one)")
    parser.add_argument("--timeout", type=int, default=30, help="seconds one input may take")
    parser.add_argument("--max-len", type=int, default=65536, help="largest input, bytes")
    parser.add_argument("--source-root", type=pathlib.Path, default=ROOT,
                        help="Loom's source tree (a UBSan report in a file under it, or "
                             "under the fuzzer's build tree, is Loom's)")
    parser.add_argument("--loom-opt", help="loom-opt, which make_seeds.py makes steps with")
    args = parser.parse_args()
    if not os.access(args.fuzzer, os.X_OK):
        print(f"error: {args.fuzzer} is not built (cmake --build build --target loom-fuzz-build)")
        return 1
    # The fuzzer's build tree (BUILD/bin/loom-fuzz): its generated code is Loom's.
    roots = [args.source_root.resolve(), pathlib.Path(args.fuzzer).resolve().parents[1]]

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
    stamp = time.strftime("%Y%m%d-%H%M%S")
    artifacts = args.work / "artifacts" / stamp
    for d in (corpus, artifacts):
        d.mkdir(parents=True, exist_ok=True)
    dictionary = args.work / "mlir.dict"
    seeding = [sys.executable, str(HERE / "make_seeds.py"), str(seeds), "--fuzzer", args.fuzzer,
               "--max-len", str(args.max_len), "--dict", str(dictionary)]
    if args.loom_opt:
        seeding += ["--loom-opt", args.loom_opt]
    seeded = subprocess.run(seeding, capture_output=True, text=True, env=ENV)
    if seeded.returncode:
        print(seeded.stdout + seeded.stderr)
        print("FAIL: make_seeds.py could not write the seed corpus")
        return 1
    print(seeded.stdout.strip())
    command = [args.fuzzer, str(corpus), str(seeds), f"-max_total_time={args.seconds}",
               f"-timeout={args.timeout}", "-rss_limit_mb=4096", f"-max_len={args.max_len}",
               f"-artifact_prefix={artifacts}/", f"-fork={max(args.fork, 1)}", f"-dict={dictionary}",
               "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1"]
    began = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=ENV)
    elapsed = time.monotonic() - began
    log = proc.stderr
    (args.work / "last-run.log").write_text(log)
    status = re.findall(r"#(\d+): cov: (\d+) ft: (\d+) corp: (\d+)", log)
    summary = (f"{elapsed:.0f} s, {status[-1][0]} inputs run, coverage {status[-1][1]} edges, "
               f"{status[-1][2]} features, corpus {status[-1][3]}" if status
               else f"{elapsed:.0f} s, no status line")
    if proc.returncode and not status:
        print(log[-6000:])
        print(f"FAIL: libFuzzer did not run (exit {proc.returncode})")
        return 1

    loom, upstream, unreproduced, slow = [], [], [], []
    for artifact in sorted(artifacts.iterdir()):
        kind = next((k for k in KINDS if artifact.name.startswith(k + "-")), "crash")
        if kind == "slow-unit":
            slow.append(artifact)
            continue
        report = None
        for _ in range(3):
            replay = subprocess.run([args.fuzzer, f"-timeout={args.timeout}", str(artifact)],
                                    capture_output=True, text=True, env=ENV)
            if replay.returncode:
                report = replay.stderr
                break
        if report is None:
            unreproduced.append((artifact, kind))
        elif isLooms(report, roots, os.path.basename(args.fuzzer)):
            loom.append((artifact, report))
        else:
            upstream.append((artifact, report))

    findings = args.work / "findings"

    def keep(artifact: pathlib.Path, where: str, report: str) -> pathlib.Path:
        folder = findings / where
        folder.mkdir(parents=True, exist_ok=True)
        kept = folder / f"{stamp}-{artifact.name}"
        shutil.copyfile(artifact, kept)
        kept.with_name(kept.name + ".log").write_text(report)
        return kept

    for artifact, report in upstream:
        keep(artifact, "upstream", report)
        what = re.search(r"^loom-fuzz: ERROR: (upstream pass .*)$", report, re.M) or \
            re.search(r"#\d+ 0x[0-9a-f]+ in (\S+)", report)
        print(f"upstream: {artifact.name}: {what.group(1) if what else 'no frame'}")
    for artifact in slow:
        print(f"slow (not a finding): {artifact.name}")
    for artifact, kind in unreproduced:
        kept = keep(artifact, "unreproduced", f"{kind}: passed 3 replays\n")
        print(f"unreproduced {kind}: {kept}\n{describe(args.fuzzer, artifact)}\n")
    if unreproduced:
        # Fork mode echoes the error lines of its jobs' logs; which job wrote
        # which input it does not say, so all of them are shown.
        errors = collections.Counter(
            line.strip() for line in log.splitlines()
            if "ERROR:" in line or "runtime error:" in line)
        print("the run's error lines:")
        for line, count in errors.most_common(20):
            print(f"  {count} x {line}")
    for artifact, report in loom:
        keep(artifact, "loom", report)
    for artifact, report in loom[:3]:
        print(report[-5000:])
        print(describe(args.fuzzer, artifact))
    if loom or unreproduced:
        print(f"FAIL: {len(loom)} finding(s) in Loom's code and {len(unreproduced)} that did "
              f"not reproduce, kept in {findings} ({summary}; {len(upstream)} in upstream MLIR)")
        return 1
    print(f"no crash, hang, invalid IR or silent failure in Loom's code in {args.seconds} s: "
          f"{summary} ({len(upstream)} finding(s) in upstream MLIR only)")
    return 0


def isUnder(path: str, roots: list[pathlib.Path]) -> bool:
    """Whether source file `path` (as the compiler saw it) is in one of `roots`.
    A relative path (glibc's frames name theirs so) counts only where a root
    holds it."""
    file = pathlib.Path(path)
    if file.is_absolute():
        resolved = pathlib.Path(os.path.realpath(file))
        return any(resolved.is_relative_to(root) for root in roots)
    return any((root / file).is_file() for root in roots)


def isLooms(report: str, roots: list[pathlib.Path], binary: str) -> bool:
    """Whether a replayed finding is Loom's: the pass checker's own report (but
    for invalid IR an upstream pass made of IR upstream verifiers accepted), a
    UBSan report in a file of Loom's trees, or a stack frame in Loom's code
    below the signal: in the fuzzer binary `binary` (Loom is linked into it
    statically; without debug information frames name the module) or, with
    it, in a file of Loom's trees."""
    if re.search(r"^loom-fuzz: ERROR: upstream pass ", report, re.M):
        return False
    if re.search(r"^loom-fuzz: ERROR: ", report, re.M):
        return True
    # UBSan names the source file of the undefined behaviour first:
    # FILE:LINE:COL: runtime error: ...
    for match in re.finditer(r"^(.+?):\d+:\d+: runtime error:", report, re.M):
        if isUnder(match.group(1), roots):
            return True
    ours = re.compile(r"#\d+ 0x[0-9a-f]+ in (\S+) .*\(.*" + re.escape(binary) + r"\+")
    located = re.compile(r"#\d+ 0x[0-9a-f]+ in (\S+) (\S+?):\d+(:\d+)?$")
    harness = ("LLVMFuzzerTestOneInput", "fuzzer::", "main", "_start", "__sanitizer", "__asan",
               "__ubsan", "__interceptor", "__lsan")
    for line in report.splitlines():
        if match := ours.search(line):
            if not match.group(1).startswith(harness):
                return True
        elif match := located.search(line.strip()):
            if not match.group(1).startswith(harness) and isUnder(match.group(2), roots):
                return True
    return False


if __name__ == "__main__":
    sys.exit(main())
