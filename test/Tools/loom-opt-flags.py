# Tests that every pass and pipeline flag Loom adds to loom-opt (those
# mlir-opt of the same LLVM does not have) lives in one file named after it
# under lib/ (`codegen-memory-plan` in CodegenMemoryPlan.cpp), and that every
# file defining a pass is named after a flag loom-opt registers.
# RUN: %python %s %loom_src_root | FileCheck %s
# CHECK: {{[0-9]+}} Loom flags, each in its own file
# CHECK-NEXT: every pass definition is named after its flag

import pathlib
import re
import subprocess
import sys

root = pathlib.Path(sys.argv[1])


def flags(tool: str) -> set[str]:
    text = subprocess.run([tool, "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"^      --([a-z0-9-]+)", text, re.M))


loom = sorted(flags("loom-opt") - flags("mlir-opt"))
files = {}
for path in (root / "lib").rglob("*.cpp"):
    files.setdefault(path.name, []).append(path)
failed = False
for flag in loom:
    name = "".join(word.capitalize() for word in flag.split("-")) + ".cpp"
    found = files.get(name, [])
    if len(found) != 1:
        print(f"FAIL: --{flag} should live in one file lib/**/{name}, found {len(found)}")
        failed = True
print(f"{len(loom)} Loom flags, each in its own file")

names = {"".join(word.capitalize() for word in flag.split("-")) for flag in loom}
for path in sorted((root / "lib").rglob("*.cpp")):
    defined = re.findall(r"#define GEN_PASS_DEF_([A-Z0-9]+)PASS\b", path.read_text())
    for pass_name in defined:
        if pass_name != path.stem.upper() or path.stem not in names:
            print(f"FAIL: {path.relative_to(root)} defines {pass_name}PASS; "
                  f"a pass lives in the file named after its flag")
            failed = True
if not failed:
    print("every pass definition is named after its flag")
sys.exit(1 if failed else 0)
