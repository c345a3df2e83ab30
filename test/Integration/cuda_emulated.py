#!/usr/bin/env python3
"""The runtime's CUDA kernels, run on the CPU.

runtime/Kernels/CUDA/FlashAttention.cu (f32), FlashAttentionBf16.cu (bf16, tensor
cores) and CrossEntropy.cu (the fused loss's row kernels) are turned into
C++ for CudaEmulation/cuda_runtime.h, which runs each block's threads as
std::threads and emulates warp shuffles and mma.sync with PTX's fragment
layouts. CudaEmulation/flash_test.cpp then checks the attention kernels'
outputs and gradients against a double-precision reference over shapes that
cover partial blocks, causal masking, grouped-query heads, both head-dim
templates and the argument checks; xent_test.cpp does the same for the loss
kernels. Without a GPU this is what checks the kernels' indexing, masking
and synchronisation; on a GPU, kernels.py and cuda_target.py check the same
kernels' results inside trainers. embedding_test.cpp runs EmbeddingGrad.cu
against a double sum and, bit for bit, the CPU backend's version
(HostEmbeddingGrad.cpp).

    cuda_emulated.py --dir DIR [--cxx c++]
"""

import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME = os.path.join(HERE, "..", "..", "runtime")
KERNELS = os.path.join(RUNTIME, "Kernels")
INCLUDE = os.path.join(RUNTIME, "include")
EMULATION = os.path.join(HERE, "CudaEmulation")
# Each test, and the kernel sources it runs (a CPU kernel counts its scratch
# on the trainer's heap, so the heap comes with it).
TESTS = {"flash_test": ("FlashAttention.cu", "FlashAttentionBf16.cu"),
         "xent_test": ("CrossEntropy.cu",),
         "embedding_test": ("EmbeddingGrad.cu", "Host/HostEmbeddingGrad.cpp",
                            "../Heap/ProcessHeap.cpp")}


def emulated(source):
    """`source` (CUDA) as C++ for the emulation header."""
    text = open(os.path.join(KERNELS, "CUDA", source)).read()
    text = text.replace("extern __shared__ float4 sharedMem[];",
                        "float4 *sharedMem = static_cast<float4 *>(emu::shared);")
    text, launches = re.subn(r"(\w+(?:<[^<>]*>)?)\s*<<<(.*?)>>>\s*\((.*?)\);",
                             r"emuLaunch(\2, [&] { \1(\3); });", text, flags=re.S)
    if launches == 0:
        sys.exit(f"{source}: no kernel launches found")
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    failed = 0
    for test, kernels in TESTS.items():
        sources = []
        for source in kernels:
            if not source.endswith(".cu"):  # a CPU backend's reference
                sources.append(os.path.join(KERNELS, source))
                continue
            out = os.path.join(args.dir, source.replace(".cu", ".emulated.cpp"))
            with open(out, "w") as f:
                f.write(emulated(source))
            sources.append(out)
        binary = os.path.join(args.dir, test)
        subprocess.run([args.cxx, "-std=c++20", "-O2", "-pthread", "-DLOOM_CUDA_EMULATION",
                        "-I", EMULATION,
                        "-I", os.path.join(KERNELS, "CUDA"), "-I", RUNTIME, "-I", INCLUDE, os.path.join(EMULATION, f"{test}.cpp"),
                        *sources, "-o", binary], check=True)
        failed |= subprocess.run([binary]).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
