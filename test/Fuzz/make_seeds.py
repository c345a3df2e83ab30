#!/usr/bin/env python3
"""Writes loom-fuzz's seed corpus: every split of every lit .mlir input (a
selector byte chosen from its text, so that the seeds spread over the
pipelines), the tiny Llama's forward with each pipeline, and, for the
pipelines and passes that take a forward or a step with option values drawn
by the input (train-microbatch, pp-partition, train-remat,
coll-reorder-baseline), forwards and the steps loom-opt makes of them, with
the option bytes of a few choices (the first of each choice first, which is
the common value).

    make_seeds.py OUT_DIR --fuzzer build/fuzz/bin/loom-fuzz [--loom-opt PATH]
                  [--max-len 65536] [--check]

--check runs each of those seeds through loom-opt with the pipeline it
selects and counts the ones accepted. --dict writes a libFuzzer dictionary:
the op and attribute names of the lit inputs and a few tokens of hostile IR
(an op of an unknown dialect, a terminator it does not know), which byte
mutations would seldom spell.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python-bindings"))
from loom.models.llama import CONFIGS, LlamaConfig, build_forward  # noqa: E402
from loom.opt import find_loom_opt  # noqa: E402

# A Llama small enough that its steps fit libFuzzer's input size
# (--max-len) with every op the tiny one has; train-remat.mlir's forward
# has more layers.
SEED_LLAMA = LlamaConfig(layers=1, dim=8, heads=2, kv_heads=1, ffn=16, vocab=16, seq=4, batch=4)
# Hand-written forwards the lit tests split into stages and recompute.
FORWARDS = ("test/PipelineParallel/Inputs/mlp.mlir", "test/Remat/train-remat.mlir")
# The steps the passes under test take, made from each forward by loom-opt.
STEPS = {
    "autodiff": "train-autodiff",
    "optimizer": "train-autodiff,train-optimizer{kind=sgd}",
    "microbatched": "train-microbatch{microbatches=2},train-autodiff,train-optimizer",
    "zero1": "train-autodiff,train-optimizer,zero-partition{stage=1 world-size=2}",
    "zero2": "train-autodiff,train-optimizer,zero-partition{stage=2 world-size=4}",
    "zero3": "train-autodiff,zero-partition{stage=3 world-size=2}",
}
# What each pipeline or pass takes, by its first pass: a forward, or steps.
TAKES = {
    "train-microbatch": ["forward"],
    "train-autodiff": ["forward"],
    "loom-training-step-pipeline": ["forward"],
    "pp-partition": ["optimizer", "microbatched"],
    "train-remat": ["autodiff", "zero3", "zero1"],
    "func.func(coll-reorder-baseline": ["zero3", "zero2", "zero1"],
}
CHOICE = re.compile(r"\[([^\]]*)\]")
# Op and attribute names: dotted identifiers that are not SSA values,
# attribute aliases, blocks or symbols.
NAME = re.compile(r"(?<![%#^@\w.])([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_.]*)")
# Hostile tokens: unknown ops (anywhere, as the terminator), role
# attributes, a dynamic dimension, an unranked tensor.
TOKENS = ('"foo.op"', '"foo.op"(%0) : (tensor<4xf32>) -> tensor<4xf32>', '"foo.term"() : () -> ()',
          '{train.param = "layers.0.w"}', '{train.grad = "w"}', '{train.input = "x"}',
          '{train.loss}', '{train.microbatch = 1 : i64}', 'tensor<?x4xf32>', 'tensor<*xf32>',
          'tensor<0x4xf32>', '^bb1:', 'cf.br ^bb1', 'loc("loom.op.1")')


def write_dict(path: pathlib.Path, texts: list[str]) -> int:
    """A libFuzzer dictionary of `texts`' names seen twice or more, and TOKENS."""
    counts: dict[str, int] = {}
    for text in texts:
        for name in NAME.findall(text):
            counts[name] = counts.get(name, 0) + 1
    entries = sorted(n for n, c in counts.items() if c >= 2) + list(TOKENS)

    def escape(token: str) -> str:
        return "".join(c if c.isprintable() and c not in '"\\' else f"\\x{ord(c):02x}"
                       for c in token)

    path.write_text("".join(f'"{escape(t)}"\n' for t in entries))
    return len(entries)


@dataclasses.dataclass
class Seed:
    data: bytes
    kind: str  # what its IR is: forward or a STEPS key


def split_lit(path: pathlib.Path) -> list[str]:
    """The chunks of a lit input, without RUN lines."""
    chunks = []
    for chunk in path.read_text().split("// -----"):
        lines = [l for l in chunk.splitlines() if not l.lstrip().startswith("// RUN")]
        text = "\n".join(lines).strip()
        if text:
            chunks.append(text)
    return chunks


def option_bytes(template: str, variant: int) -> bytes:
    """The bytes that draw, for each choice of `template`, its `variant`-th
    alternative (modulo their count)."""
    return bytes(variant % len(c.split(";")) for c in CHOICE.findall(template))


def make_inputs(loom_opt: str, forwards: dict[str, str]) -> dict[str, list[str]]:
    """The forwards and each STEPS pipeline on each (those loom-opt accepts),
    each also in the generic form, where a mutated op name still parses (as
    an op of an unknown dialect, which passes must take)."""
    inputs: dict[str, list[str]] = {"forward": [], **{kind: [] for kind in STEPS}}
    for name, forward in forwards.items():
        for kind, pipeline in [("forward", ""), *STEPS.items()]:
            proc = subprocess.run([loom_opt, f"--pass-pipeline=builtin.module({pipeline})"],
                                  input=forward, capture_output=True, text=True)
            if proc.returncode:
                print(f"note: {name} does not take {pipeline}: "
                      f"{proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else ''}")
                continue
            generic = subprocess.run([loom_opt, "--mlir-print-op-generic"], input=proc.stdout,
                                     capture_output=True, text=True, check=True).stdout
            inputs[kind] += [forward if kind == "forward" else proc.stdout, generic]
    return inputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--fuzzer", required=True, help="loom-fuzz, which lists its pipelines")
    parser.add_argument("--loom-opt", help="loom-opt, which makes the steps (default: found "
                        "as loom.find_tool does)")
    parser.add_argument("--max-len", type=int, default=65536,
                        help="libFuzzer's largest input: larger pass seeds are left out")
    parser.add_argument("--dict", type=pathlib.Path, help="where to write the dictionary")
    parser.add_argument("--check", action="store_true",
                        help="count the pass seeds loom-opt accepts with their pipelines")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    def listing(flag: str) -> list[str]:
        text = subprocess.run([args.fuzzer, flag], capture_output=True, text=True,
                              check=True).stdout
        return [line.split(" ", 1)[1] for line in text.splitlines()]

    pipelines, passes = listing("--print-pipelines"), listing("--print-passes")
    count = 0

    def write(data: bytes) -> pathlib.Path:
        nonlocal count
        path = args.out / hashlib.sha1(data).hexdigest()
        path.write_bytes(data)
        count += 1
        return path

    lit = sorted((ROOT / "test").rglob("*.mlir"))
    texts = [text for path in lit + sorted((ROOT / "examples").glob("*.mlir"))
             for text in split_lit(path)]
    if args.dict:
        print(f"{write_dict(args.dict, texts)} entries in {args.dict}")
    for path in lit + sorted((ROOT / "examples").glob("*.mlir")):
        for text in split_lit(path):
            write(bytes([int(hashlib.sha1(text.encode()).hexdigest(), 16) % len(pipelines)])
                  + text.encode())
    forward = build_forward(CONFIGS["tiny"])
    for selector in range(len(pipelines)):
        write(bytes([selector]) + forward.encode())
    # Random pipelines (a first byte from 128 on: 1 to 3 passes named by
    # the next bytes) over the lit inputs' first chunks.
    for index, path in enumerate(lit):
        chunk = path.read_text().split("// -----")[0]
        text = "\n".join(l for l in chunk.splitlines() if not l.lstrip().startswith("// RUN"))
        write(bytes([128 + index % 3, (index * 7) % 256, (index * 13) % 256, (index * 29) % 256])
              + text.encode())

    # The passes that take a forward or a step, with their options drawn.
    forwards = {"llama": build_forward(SEED_LLAMA)}
    for name in FORWARDS:
        forwards[name] = split_lit(ROOT / name)[0]
    loom_opt = args.loom_opt or find_loom_opt()
    inputs = make_inputs(loom_opt, forwards)
    seeds: list[Seed] = []
    for selector, template in enumerate(pipelines):
        takes = next((kinds for first, kinds in TAKES.items() if template.startswith(first)), None)
        if takes is None or not CHOICE.search(template):
            continue
        for variant in range(3):
            head = bytes([selector]) + option_bytes(template, variant)
            seeds += [Seed(head + text.encode(), kind) for kind in takes for text in inputs[kind]]
    for index, template in enumerate(passes):
        takes = next((kinds for first, kinds in TAKES.items() if template.startswith(first)), None)
        if takes is None:
            continue
        for variant in range(3):
            # One pass (128 % 3 == 2 would be three): 129 % 3 == 0.
            head = bytes([129, index]) + option_bytes(template, variant)
            seeds += [Seed(head + text.encode(), kind) for kind in takes for text in inputs[kind]]
    fitting = [seed for seed in seeds if len(seed.data) <= args.max_len]
    paths = [(write(seed.data), seed) for seed in fitting]
    print(f"{count} seeds in {args.out} ({len(fitting)} for the passes that take forwards and "
          f"steps; {len(seeds) - len(fitting)} over {args.max_len} bytes left out)")
    if args.check:
        return check(args.fuzzer, loom_opt, paths)
    return 0


def check(fuzzer: str, loom_opt: str, paths: list[tuple[pathlib.Path, Seed]]) -> int:
    """Runs each seed's pipeline on its IR with loom-opt; prints how many each
    pipeline accepts."""
    results: dict[str, list[int]] = {}
    for path, seed in paths:
        lines = subprocess.run([fuzzer, "--print-pipeline-of", str(path)], capture_output=True,
                               text=True, check=True).stdout.splitlines()
        pipeline, offset = lines[0], int(lines[1])
        proc = subprocess.run([loom_opt, f"--pass-pipeline=builtin.module({pipeline})",
                               "-o", os.devnull], input=seed.data[offset:], capture_output=True)
        tally = results.setdefault(f"{pipeline} <- {seed.kind}", [0, 0])
        tally[0 if proc.returncode == 0 else 1] += 1
    for name, (accepted, rejected) in sorted(results.items()):
        print(f"{accepted:3d} accepted, {rejected:3d} rejected: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
