# Tests train-autodiff on every op kind it supports: the gradient of
# loss = sum(op(params, inputs) * r) for a random r, projected on a random
# direction, against f64 central differences of the forward (loom-run).
# RUN: %python %s | FileCheck %s
# CHECK-NOT: FAIL
# CHECK: all gradients match

import os
import sys

import numpy as np

from loom.testing import directional_gradient_errors

rng = np.random.default_rng(7)
TOLERANCE = 1e-6
failures = 0


def ttype(shape, elem="f64"):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def check(name, params, body, out_shape, inputs=(), positive=(), eps=1e-6, tolerance=TOLERANCE):
    """`params`: (name, shape); `inputs`: (name, array); `body` defines %y."""
    global failures
    args, sig = [], []
    for pname, shape in params:
        value = rng.standard_normal(shape)
        if pname in positive:
            value = np.abs(value) + 0.5
        args.append(value)
        sig.append(f"%{pname}: {ttype(shape)} {{train.param = \"{pname}\"}}")
    for iname, array in inputs:
        elem = {np.dtype(np.float64): "f64", np.dtype(np.int32): "i32"}[array.dtype]
        args.append(array)
        sig.append(f"%{iname}: {ttype(array.shape, elem)} {{train.input}}")
    args.append(rng.standard_normal(out_shape))
    sig.append(f"%r_: {ttype(out_shape)} {{train.input}}")
    rank = len(out_shape)
    dims = ", ".join(f"d{i}" for i in range(rank))
    source = f"""
func.func @f({', '.join(sig)}) -> (tensor<f64> {{train.loss}}) {{
{body}
  %zero_ = arith.constant 0.0 : f64
  %e_ = tensor.empty() : tensor<f64>
  %acc_ = linalg.fill ins(%zero_ : f64) outs(%e_ : tensor<f64>) -> tensor<f64>
  %loss = linalg.generic {{indexing_maps = [affine_map<({dims}) -> ({dims})>, affine_map<({dims}) -> ({dims})>,
                                          affine_map<({dims}) -> ()>],
                          iterator_types = [{', '.join(['"reduction"'] * rank)}]}}
      ins(%y, %r_ : {ttype(out_shape)}, {ttype(out_shape)}) outs(%acc_ : tensor<f64>) {{
    ^bb0(%ya_: f64, %ra_: f64, %oa_: f64):
      %ma_ = arith.mulf %ya_, %ra_ : f64
      %sa_ = arith.addf %oa_, %ma_ : f64
      linalg.yield %sa_ : f64
  }} -> tensor<f64>
  return %loss : tensor<f64>
}}
"""
    try:
        errors = directional_gradient_errors(source, "f", args, list(range(len(params))), eps=eps)
    except Exception as err:  # a diagnostic is a failure of this case
        print(f"FAIL {name}: {err}")
        failures += 1
        return
    worst = max(errors)
    ok = worst < tolerance
    failures += not ok
    print(f"{'ok' if ok else 'FAIL'} {name}: max relative error {worst:.2e}")


EW = "affine_map<(i, j) -> (i, j)>"
ZERO = "  %z = arith.constant 0.0 : f64\n"

# --- linalg named ops -------------------------------------------------------
check("matmul", [("a", (3, 4)), ("b", (4, 5))], ZERO + """
  %e = tensor.empty() : tensor<3x5xf64>
  %f = linalg.fill ins(%z : f64) outs(%e : tensor<3x5xf64>) -> tensor<3x5xf64>
  %y = linalg.matmul ins(%a, %b : tensor<3x4xf64>, tensor<4x5xf64>) outs(%f : tensor<3x5xf64>) -> tensor<3x5xf64>""", (3, 5))
check("matmul transposed operand, accumulating into a parameter", [("a", (3, 4)), ("b", (5, 4)), ("c", (3, 5))], """
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%a, %b : tensor<3x4xf64>, tensor<5x4xf64>) outs(%c : tensor<3x5xf64>) -> tensor<3x5xf64>""", (3, 5))
check("batch_matmul", [("a", (2, 3, 4)), ("b", (2, 4, 5))], ZERO + """
  %e = tensor.empty() : tensor<2x3x5xf64>
  %f = linalg.fill ins(%z : f64) outs(%e : tensor<2x3x5xf64>) -> tensor<2x3x5xf64>
  %y = linalg.batch_matmul ins(%a, %b : tensor<2x3x4xf64>, tensor<2x4x5xf64>) outs(%f : tensor<2x3x5xf64>) -> tensor<2x3x5xf64>""", (2, 3, 5))
check("transpose", [("a", (3, 4, 2))], """
  %e = tensor.empty() : tensor<2x3x4xf64>
  %y = linalg.transpose ins(%a : tensor<3x4x2xf64>) outs(%e : tensor<2x3x4xf64>) permutation = [2, 0, 1]""", (2, 3, 4))
check("broadcast", [("a", (3,))], """
  %e = tensor.empty() : tensor<4x3xf64>
  %y = linalg.broadcast ins(%a : tensor<3xf64>) outs(%e : tensor<4x3xf64>) dimensions = [0]""", (4, 3))
check("reduce (sum of squares)", [("a", (3, 4))], ZERO + """
  %e = tensor.empty() : tensor<4xf64>
  %f = linalg.fill ins(%z : f64) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  %y = linalg.reduce ins(%a : tensor<3x4xf64>) outs(%f : tensor<4xf64>) dimensions = [0]
    (%in: f64, %acc: f64) {
      %sq = arith.mulf %in, %in : f64
      %s = arith.addf %acc, %sq : f64
      linalg.yield %s : f64
    }""", (4,))
for op in ["add", "sub", "mul", "div", "max", "min", "powf"]:
    check(f"elementwise {op}", [("a", (3, 4)), ("b", (3, 4))], f"""
  %e = tensor.empty() : tensor<3x4xf64>
  %y = linalg.{op} ins(%a, %b : tensor<3x4xf64>, tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) -> tensor<3x4xf64>""",
          (3, 4), positive=("a",) if op == "powf" else ())
for op in ["exp", "log", "sqrt", "rsqrt", "tanh", "negf", "abs", "reciprocal", "square", "erf"]:
    check(f"elementwise {op}", [("a", (3, 4))], f"""
  %e = tensor.empty() : tensor<3x4xf64>
  %y = linalg.{op} ins(%a : tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) -> tensor<3x4xf64>""",
          (3, 4), positive=("a",) if op in ("log", "sqrt", "rsqrt") else ())

# --- linalg.generic bodies --------------------------------------------------
check("generic SwiGLU body (silu(g) * u) with a broadcast scale", [("g", (3, 4)), ("u", (3, 4)), ("s", (4,))], f"""
  %e = tensor.empty() : tensor<3x4xf64>
  %y = linalg.generic {{indexing_maps = [{EW}, {EW}, affine_map<(i, j) -> (j)>, {EW}], iterator_types = ["parallel", "parallel"]}}
      ins(%g, %u, %s : tensor<3x4xf64>, tensor<3x4xf64>, tensor<4xf64>) outs(%e : tensor<3x4xf64>) {{
    ^bb0(%gi: f64, %ui: f64, %si: f64, %o: f64):
      %one = arith.constant 1.0 : f64
      %n = arith.negf %gi : f64
      %ex = math.exp %n : f64
      %den = arith.addf %one, %ex : f64
      %silu = arith.divf %gi, %den : f64
      %p = arith.mulf %silu, %ui : f64
      %q = arith.mulf %p, %si : f64
      linalg.yield %q : f64
  }} -> tensor<3x4xf64>""", (3, 4))
check("generic with select, sin, cos, fma", [("a", (3, 4)), ("b", (3, 4))], f"""
  %e = tensor.empty() : tensor<3x4xf64>
  %y = linalg.generic {{indexing_maps = [{EW}, {EW}, {EW}], iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : tensor<3x4xf64>, tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) {{
    ^bb0(%ai: f64, %bi: f64, %o: f64):
      %c0 = arith.constant 0.0 : f64
      %pos = arith.cmpf ogt, %ai, %c0 : f64
      %s = math.sin %ai : f64
      %c = math.cos %bi : f64
      %sel = arith.select %pos, %s, %c : f64
      %f = math.fma %sel, %bi, %ai : f64
      linalg.yield %f : f64
  }} -> tensor<3x4xf64>""", (3, 4))
# Through f32 the forward is only piecewise smooth at f64 resolution: a larger
# step and an f32-sized tolerance.
check("generic computing in f32 (truncf/extf)", [("a", (3, 4))], f"""
  %e = tensor.empty() : tensor<3x4xf64>
  %y = linalg.generic {{indexing_maps = [{EW}, {EW}], iterator_types = ["parallel", "parallel"]}}
      ins(%a : tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) {{
    ^bb0(%ai: f64, %o: f64):
      %t = arith.truncf %ai : f64 to f32
      %s = math.tanh %t : f32
      %x = arith.extf %s : f32 to f64
      linalg.yield %x : f64
  }} -> tensor<3x4xf64>""", (3, 4), eps=1e-3, tolerance=1e-3)
check("value used several times accumulates", [("a", (3, 4))], f"""
  %e = tensor.empty() : tensor<3x4xf64>
  %t = linalg.tanh ins(%a : tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) -> tensor<3x4xf64>
  %m = linalg.mul ins(%t, %a : tensor<3x4xf64>, tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) -> tensor<3x4xf64>
  %y = linalg.add ins(%m, %t : tensor<3x4xf64>, tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) -> tensor<3x4xf64>""", (3, 4))

# --- tensor ops ---------------------------------------------------------------
check("expand_shape and collapse_shape", [("a", (6, 4))], """
  %x = tensor.expand_shape %a [[0, 1], [2]] output_shape [2, 3, 4] : tensor<6x4xf64> into tensor<2x3x4xf64>
  %e = tensor.empty() : tensor<2x3x4xf64>
  %t = linalg.exp ins(%x : tensor<2x3x4xf64>) outs(%e : tensor<2x3x4xf64>) -> tensor<2x3x4xf64>
  %y = tensor.collapse_shape %t [[0], [1, 2]] : tensor<2x3x4xf64> into tensor<2x12xf64>""", (2, 12))
check("extract_slice, insert_slice and concat", [("a", (4, 6)), ("b", (2, 3))], """
  %s = tensor.extract_slice %a[1, 2] [2, 3] [1, 1] : tensor<4x6xf64> to tensor<2x3xf64>
  %i = tensor.insert_slice %b into %a[2, 0] [2, 3] [1, 1] : tensor<2x3xf64> into tensor<4x6xf64>
  %c = tensor.concat dim(1) %s, %b : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x6xf64>
  %y = tensor.concat dim(0) %i, %c : (tensor<4x6xf64>, tensor<2x6xf64>) -> tensor<6x6xf64>""", (6, 6))
check("a tensor's halves rotated and rejoined (RoPE: disjoint slices merged)",
      [("x", (3, 8)), ("c", (3, 4))], """
  %x1 = tensor.extract_slice %x[0, 0] [3, 4] [1, 1] : tensor<3x8xf64> to tensor<3x4xf64>
  %x2 = tensor.extract_slice %x[0, 4] [3, 4] [1, 1] : tensor<3x8xf64> to tensor<3x4xf64>
  %e = tensor.empty() : tensor<3x4xf64>
  %a = linalg.mul ins(%x1, %c : tensor<3x4xf64>, tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) -> tensor<3x4xf64>
  %r1 = linalg.sub ins(%a, %x2 : tensor<3x4xf64>, tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) -> tensor<3x4xf64>
  %b = linalg.mul ins(%x2, %c : tensor<3x4xf64>, tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) -> tensor<3x4xf64>
  %r2 = linalg.add ins(%b, %x1 : tensor<3x4xf64>, tensor<3x4xf64>) outs(%e : tensor<3x4xf64>) -> tensor<3x4xf64>
  %o = tensor.empty() : tensor<3x8xf64>
  %i1 = tensor.insert_slice %r1 into %o[0, 0] [3, 4] [1, 1] : tensor<3x4xf64> into tensor<3x8xf64>
  %y = tensor.insert_slice %r2 into %i1[0, 4] [3, 4] [1, 1] : tensor<3x4xf64> into tensor<3x8xf64>""", (3, 8))
check("overlapping and partial slices still add", [("x", (3, 8))], """
  %x1 = tensor.extract_slice %x[0, 0] [3, 5] [1, 1] : tensor<3x8xf64> to tensor<3x5xf64>
  %x2 = tensor.extract_slice %x[0, 3] [3, 5] [1, 1] : tensor<3x8xf64> to tensor<3x5xf64>
  %x3 = tensor.extract_slice %x[0, 0] [3, 2] [1, 1] : tensor<3x8xf64> to tensor<3x2xf64>
  %e = tensor.empty() : tensor<3x5xf64>
  %p = linalg.mul ins(%x1, %x2 : tensor<3x5xf64>, tensor<3x5xf64>) outs(%e : tensor<3x5xf64>) -> tensor<3x5xf64>
  %o = tensor.empty() : tensor<3x7xf64>
  %i = tensor.insert_slice %p into %o[0, 0] [3, 5] [1, 1] : tensor<3x5xf64> into tensor<3x7xf64>
  %y = tensor.insert_slice %x3 into %i[0, 5] [3, 2] [1, 1] : tensor<3x2xf64> into tensor<3x7xf64>""", (3, 7))

# --- train ops ----------------------------------------------------------------
ids = rng.integers(0, 10, (2, 5)).astype(np.int32)
ids[0, :3] = 4
check("train.embedding", [("t", (10, 4))], """
  %y = train.embedding %t[%ids] : tensor<10x4xf64>, tensor<2x5xi32> -> tensor<2x5x4xf64>""", (2, 5, 4), inputs=[("ids", ids)])
check("train.rms_norm", [("x", (2, 3, 8)), ("w", (8,))], """
  %y = train.rms_norm %x, %w eps = 1.0e-05 : tensor<2x3x8xf64>, tensor<8xf64>""", (2, 3, 8))
check("train.rope", [("x", (2, 5, 3, 8))], """
  %y = train.rope %x theta = 10000.0 : tensor<2x5x3x8xf64>""", (2, 5, 3, 8))
check("train.rope inverse", [("x", (2, 5, 3, 8))], """
  %y = train.rope %x theta = 10000.0 inverse : tensor<2x5x3x8xf64>""", (2, 5, 3, 8))
for causal in ("causal ", ""):
    check(f"train.attention {causal or 'full '}(GQA 4 heads / 2 kv heads)",
          [("q", (2, 5, 4, 6)), ("k", (2, 5, 2, 6)), ("v", (2, 5, 2, 6))], f"""
  %y = train.attention %q, %k, %v {causal}scale = 0.4 : tensor<2x5x4x6xf64>, tensor<2x5x2x6xf64>""", (2, 5, 4, 6))
labels = rng.integers(0, 7, 9).astype(np.int32)
labels[[1, 4]] = -100
for reduction, shape in [("mean", ()), ("sum", ()), ("none", (9,))]:
    for ls, z in [(0.0, 0.0), (0.2, 0.01)]:
        out = ttype(shape)
        check(f"train.cross_entropy {reduction} label_smoothing={ls} z_loss={z}", [("l", (9, 7))], f"""
  %y = train.cross_entropy %l, %labels ignore_index = -100 reduction = <{reduction}> label_smoothing = {ls} z_loss = {z}
      : tensor<9x7xf64>, tensor<9xi32> -> {out}""", shape, inputs=[("labels", labels)])

print("FAIL" if failures else "all gradients match")
sys.exit(1 if failures else 0)
