# loom-run's bf16 boundary: a bf16 argument is read from an f32 .npy,
# each value rounded to the nearest bf16 (ties to even), and a bf16 result
# is written as f32 (exactly). bf16 arithmetic in between computes in f32
# and rounds once per op.
# RUN: %python %s | FileCheck %s
# CHECK-NOT: FAIL
# CHECK: loom-run's bf16 boundary rounds as arith.truncf does

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from loom.testing import run_function  # noqa: E402
from reference import Checks, to_bf16  # noqa: E402

check = Checks()


SOURCE = """
func.func @f(%x: tensor<6xbf16>, %y: tensor<6xbf16>) -> (tensor<6xbf16>, tensor<6xf32>) {
  %e = tensor.empty() : tensor<6xbf16>
  %s = linalg.add ins(%x, %y : tensor<6xbf16>, tensor<6xbf16>) outs(%e : tensor<6xbf16>) -> tensor<6xbf16>
  %ef = tensor.empty() : tensor<6xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<6xbf16>) outs(%ef : tensor<6xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %c = arith.extf %a : bf16 to f32
    linalg.yield %c : f32
  } -> tensor<6xf32>
  return %s, %w : tensor<6xbf16>, tensor<6xf32>
}
"""
# Ties (1 + 2^-8 rounds down to 1, 1 + 3 * 2^-8 up), a value past the
# largest finite bf16 (infinity), a negative and a small one.
x = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, 3.4e38, -2.5, 1e-3, 0.1], np.float32)
y = np.array([2.0**-9, 0.0, 0.0, 0.75, 1e-3, 0.2], np.float32)
s, w = run_function(SOURCE, "f", [x, y])
xb, yb = to_bf16(x), to_bf16(y)
check.report(np.array_equal(w, xb, equal_nan=True),
             f"arguments round to the nearest bf16: {w.tolist()}")
check.report(np.array_equal(s, to_bf16(xb + yb)),
             f"a bf16 add rounds its f32 sum once: {s.tolist()}")
check.report(w.dtype == np.float32 and s.dtype == np.float32, "results come back as f32 .npy")
if not check.failures:
    print("loom-run's bf16 boundary rounds as arith.truncf does")
