# -*- Python -*-
"""lit configuration for Loom's IR, tool and Python tests."""

import os
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "LOOM"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".py", ".test"]
# test/Fuzz holds the fuzzer's scripts and crashers; ctest runs them.
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "Fuzz"]

config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%loom_src_root", config.loom_src_root))
config.substitutions.append(("%loom_obj_root", config.loom_obj_root))

python = config.python_executable or sys.executable
config.substitutions.append(("%python", python))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.loom_tools_dir, config.llvm_tools_dir]
# Every pipeline the suite runs is verified after each pass (mlir-opt's
# default, spelled out so that no change of default can drop it).
llvm_config.add_tool_substitutions(
    [ToolSubst("loom-opt", extra_args=["--verify-each"], unresolved="fatal")], tool_dirs)
llvm_config.with_environment("PATH", config.loom_tools_dir, append_path=True)
# `not`, `count` and FileCheck resolve even when lit runs outside the scripts.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment(
    "PYTHONPATH", os.path.join(config.loom_src_root, "python-bindings"), append_path=True
)

# PyTorch is the reference for whole-model tests; scripts/lib.sh installs it.
import subprocess
if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0:
    config.available_features.add("torch")

# loomc --cpu and the trainer's CPU check name x86 features.
import platform
if platform.machine() in ("x86_64", "AMD64"):
    config.available_features.add("x86_64-host")

# loomc generates code on several threads where the machine has them.
if (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count() or 1) >= 2:
    config.available_features.add("multicore")

# loomc --target=cuda: the CUDA toolkit and NCCL were found at build time.
if config.loom_cuda == "ON":
    config.available_features.add("cuda")
