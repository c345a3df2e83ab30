#!/usr/bin/env python3
"""Writes loom-fuzz's seed corpus: every split of every lit .mlir input (a
selector byte chosen from its text, so that the seeds spread over the
pipelines) and the tiny Llama's forward with each pipeline.

    make_seeds.py OUT_DIR [--pipelines N]
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python-bindings"))
from loom.models.llama import CONFIGS, build_forward  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--pipelines", type=int, required=True,
                        help="how many pipelines loom-fuzz chooses from")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    count = 0

    def write(selector: int, text: str) -> None:
        nonlocal count
        data = bytes([selector % 256]) + text.encode()
        name = hashlib.sha1(data).hexdigest()
        (args.out / name).write_bytes(data)
        count += 1

    for path in sorted((ROOT / "test").rglob("*.mlir")) + sorted((ROOT / "examples").glob("*.mlir")):
        for chunk in path.read_text().split("// -----"):
            lines = [l for l in chunk.splitlines() if not l.lstrip().startswith("// RUN")]
            text = "\n".join(lines).strip()
            if text:
                write(int(hashlib.sha1(text.encode()).hexdigest(), 16) % args.pipelines, text)
    forward = build_forward(CONFIGS["tiny"])
    for selector in range(args.pipelines):
        write(selector, forward)
    # Random pipelines (a first byte from 128 on: 1 to 3 passes named by
    # the next bytes) over the lit inputs' first chunks.
    for index, path in enumerate(sorted((ROOT / "test").rglob("*.mlir"))):
        chunk = path.read_text().split("// -----")[0]
        text = "\n".join(l for l in chunk.splitlines() if not l.lstrip().startswith("// RUN"))
        data = bytes([128 + index % 3, (index * 7) % 256, (index * 13) % 256, (index * 29) % 256])
        (args.out / hashlib.sha1(data + text.encode()).hexdigest()).write_bytes(data + text.encode())
        count += 1
    print(f"{count} seeds in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
