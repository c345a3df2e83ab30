# Tests the Llama builder: every config emits IR that loom-opt verifies, the
# tiny and 8B forwards differentiate and take an optimizer, the 70B forward
# parses, and bad configs are errors with a non-zero exit.
# RUN: %python %s | FileCheck %s

import dataclasses
import subprocess
import sys

from loom.models.llama import CONFIGS, build_forward, main
from loom.opt import LoomOptError, run_opt

# CHECK: tiny 0.1M params: forward ok, step ok
# CHECK: small 95.5M params: forward ok
# CHECK: llama3-8b 8030.3M params: forward ok, step ok
# CHECK: llama3-70b 70553.7M params: forward ok
for name, step in [("tiny", True), ("small", False), ("llama3-8b", True), ("llama3-70b", False)]:
    cfg = CONFIGS[name]
    text = build_forward(cfg)
    run_opt(text)
    line = f"{name} {cfg.num_parameters() / 1e6:.1f}M params: forward ok"
    if step:
        out = run_opt(text, ["--train-autodiff", "--train-optimizer"])
        grads = out.count('train.state = "') // 2
        assert f'train.param = "layers.{cfg.layers - 1}.mlp.w_down"' in out
        line += ", step ok"
    print(line)

# CHECK: tiny signature: embed [256, 64] ... output [256, 64]; 21 params
params = CONFIGS["tiny"].parameters()
print(f"tiny signature: {params[0][0]} {list(params[0][1])} ... {params[-1][0]} {list(params[-1][1])}; {len(params)} params")

# The CLI overrides config fields; bad combinations are errors.
# CHECK: cli override: 3 layers
text = subprocess.run([sys.executable, "-m", "loom.models.llama", "--config", "tiny", "--layers", "3"],
                      capture_output=True, text=True, check=True).stdout
print(f"cli override: {text.count('train.attention ')} layers")
# CHECK: bad heads: exit 2, error: heads (4) must be a multiple of kv_heads (3)
proc = subprocess.run([sys.executable, "-m", "loom.models.llama", "--kv-heads", "3"], capture_output=True, text=True)
print(f"bad heads: exit {proc.returncode}, {proc.stderr.strip()}")
# CHECK: bad dtype: exit 2
proc = subprocess.run([sys.executable, "-m", "loom.models.llama", "--dtype", "f16"], capture_output=True, text=True)
print(f"bad dtype: exit {proc.returncode}")
