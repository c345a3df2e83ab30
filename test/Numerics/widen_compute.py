# bf16 reductions at the sizes a model has, through loom-run, with and
# without codegen-widen-compute, against f64 on the same bf16 inputs: a
# gradient-style column sum over 4,096 rows, an RMSNorm over 4,096 features
# and a cross-entropy over a 4,096-entry vocabulary. Accumulated in bf16 a
# long sum stalls (past 256 x the addend each add rounds away); widened,
# each result is within a couple of bf16 roundings of f64 (the column sum
# reaches the output unrounded: the pass hands consumers of a rounded
# reduction the f32 accumulator).
# RUN: %python %s | FileCheck %s
# CHECK-NOT: FAIL
# CHECK: widened bf16 reductions match f64

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from loom.opt import run_opt  # noqa: E402
from loom.testing import run_function  # noqa: E402
from reference import Checks, elementwise_cast as cast, rms_norm, to_bf16  # noqa: E402

ROWS, WIDTH, COLS, TOKENS = 4096, 4096, 64, 8
EPS = 1e-5
check = Checks()
rng = np.random.default_rng(11)


# f32 in and out, bf16 inside (the casts are part of what is checked).
SOURCE = (
    f"func.func @f(%g: tensor<{ROWS}x{COLS}xf32>, %x: tensor<{TOKENS}x{WIDTH}xf32>, "
    f"%w: tensor<{WIDTH}xf32>, %y: tensor<{TOKENS}xi32>) -> "
    f"(tensor<{COLS}xf32>, tensor<{TOKENS}x{WIDTH}xf32>, tensor<f32>) {{\n"
    + cast("%gb", "%g", (ROWS, COLS), "arith.truncf", "f32", "bf16")
    + cast("%xb", "%x", (TOKENS, WIDTH), "arith.truncf", "f32", "bf16")
    + cast("%wb", "%w", (WIDTH,), "arith.truncf", "f32", "bf16") +
    "  %zero = arith.constant 0.0 : bf16\n"
    f"  %e = tensor.empty() : tensor<{COLS}xbf16>\n"
    f"  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<{COLS}xbf16>) -> tensor<{COLS}xbf16>\n"
    "  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, "
    "affine_map<(i, j) -> (j)>], iterator_types = [\"reduction\", \"parallel\"]} "
    f"ins(%gb : tensor<{ROWS}x{COLS}xbf16>) outs(%z : tensor<{COLS}xbf16>) {{\n"
    "  ^bb0(%a: bf16, %acc: bf16):\n    %r = arith.addf %acc, %a : bf16\n"
    f"    linalg.yield %r : bf16\n  }} -> tensor<{COLS}xbf16>\n"
    f"  %n = train.rms_norm %xb, %wb eps = {EPS:.6e} : tensor<{TOKENS}x{WIDTH}xbf16>, "
    f"tensor<{WIDTH}xbf16>\n"
    f"  %l = train.cross_entropy %xb, %y ignore_index = -100 reduction = <mean> "
    f"label_smoothing = 0.0 z_loss = 0.0 : tensor<{TOKENS}x{WIDTH}xbf16>, "
    f"tensor<{TOKENS}xi32> -> tensor<bf16>\n"
    + cast("%s32", "%s", (COLS,), "arith.extf", "bf16", "f32")
    + cast("%n32", "%n", (TOKENS, WIDTH), "arith.extf", "bf16", "f32")
    + cast("%l32", "%l", (), "arith.extf", "bf16", "f32") +
    f"  return %s32, %n32, %l32 : tensor<{COLS}xf32>, tensor<{TOKENS}x{WIDTH}xf32>, tensor<f32>\n"
    "}\n")

widened = run_opt(
    SOURCE, ["--pass-pipeline=builtin.module(train-decompose, func.func(codegen-widen-compute))"])
check.report("tensor<64xf32>" in widened and "xbf16>) outs(%" in widened,
             "the pass widened the accumulators and kept bf16 storage")

g = to_bf16(rng.uniform(0.5, 1.5, (ROWS, COLS)))
x = to_bf16(rng.standard_normal((TOKENS, WIDTH)) * 2.0)
w = to_bf16(rng.uniform(0.5, 1.5, WIDTH))
y = rng.integers(0, WIDTH, TOKENS).astype(np.int32)

x64 = x.astype(np.float64)
want_sum = g.astype(np.float64).sum(0)
want_norm = rms_norm(x64, w.astype(np.float64), EPS)
lse = np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1)) + x64.max(-1)
want_loss = float(np.mean(lse - x64[np.arange(TOKENS), y]))


def errors(source):
    s, n, loss = run_function(source, "f", [g, x, w, y])
    return (float(np.max(np.abs(s - want_sum) / np.abs(want_sum))),
            float(np.max(np.abs(n - want_norm) / (np.abs(want_norm) + 1e-3))),
            abs(float(loss) - want_loss) / abs(want_loss))


names = ("column sum over 4096 rows", "RMSNorm over 4096", "cross-entropy over 4096")
narrow, wide = errors(SOURCE), errors(widened)
ULP = 2.0**-8  # bf16's relative rounding step (half an ulp is 2^-9)
for name, a, b in zip(names, narrow, wide):
    print(f"{name}: relative error {a:.3g} in bf16, {b:.3g} widened")
for name, b in zip(names, wide):
    check.report(b <= 2 * ULP, f"{name}: widened error {b:.3g} <= 2 bf16 steps")
check.report(narrow[0] > 10 * max(wide[0], ULP / 2),
             f"the bf16 column sum's error ({narrow[0]:.3g}) is over 10x the widened one's")
if not check.failures:
    print("widened bf16 reductions match f64")
