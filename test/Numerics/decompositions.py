# Tests that every train op's linalg decomposition, lowered and run by
# loom-run, matches an independent NumPy reference, in f64 and f32.
# RUN: %python %s | FileCheck %s
# CHECK-NOT: FAIL
# CHECK: all decompositions match

import sys
import os

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import reference as ref  # noqa: E402
from loom.testing import run_function  # noqa: E402

rng = np.random.default_rng(1234)
check = ref.Checks()


def mlir_type(array):
    elem = {np.float32: "f32", np.float64: "f64", np.int32: "i32", np.int64: "i64"}[array.dtype.type]
    return "tensor<" + "".join(f"{d}x" for d in array.shape) + elem + ">"


def run_op(op_text, args, result_types):
    """Wraps one op in a function over `args` and runs it."""
    params = ", ".join(f"%a{i}: {mlir_type(a)}" for i, a in enumerate(args))
    names = ", ".join(f"%r{i}" for i in range(len(result_types)))
    source = (
        f"func.func @f({params}) -> ({', '.join(result_types)}) {{\n"
        f"  {names} = {op_text}\n"
        f"  return {names} : {', '.join(result_types)}\n}}\n"
    )
    return run_function(source, "f", args)


for dtype, rtol, atol in [(np.float64, 1e-12, 1e-12), (np.float32, 2e-5, 2e-6)]:
    t = mlir_type(np.zeros((), dtype))[7:-1]  # element type name
    tag = f"[{t}]"

    table = rng.standard_normal((50, 8)).astype(dtype)
    ids = rng.integers(0, 50, (3, 5)).astype(np.int32)
    ids[0, :2] = 7  # repeated ids accumulate
    (x,) = run_op(f"train.embedding %a0[%a1] : {mlir_type(table)}, {mlir_type(ids)} -> tensor<3x5x8x{t}>",
                  [table, ids], [f"tensor<3x5x8x{t}>"])
    check(f"embedding {tag}", x, ref.embedding(table, ids), rtol, atol)
    grad = rng.standard_normal((3, 5, 8)).astype(dtype)
    (g,) = run_op(f"train.embedding_grad %a0[%a1] : {mlir_type(grad)}, {mlir_type(ids)} -> tensor<50x8x{t}>",
                  [grad, ids], [f"tensor<50x8x{t}>"])
    check(f"embedding_grad {tag}", g, ref.embedding_grad(grad, ids, 50), rtol, atol)

    x = rng.standard_normal((2, 6, 4, 16)).astype(dtype)
    w = rng.standard_normal(16).astype(dtype)
    (y,) = run_op(f"train.rms_norm %a0, %a1 eps = 1.0e-06 : {mlir_type(x)}, {mlir_type(w)}", [x, w], [mlir_type(x)])
    check(f"rms_norm {tag}", y, ref.rms_norm(x, w, 1e-6), rtol, atol)
    (y,) = run_op(f"train.rope %a0 theta = 10000.0 : {mlir_type(x)}", [x], [mlir_type(x)])
    check(f"rope {tag}", y, ref.rope(x, 10000.0), rtol, atol)
    (z,) = run_op(f"train.rope %a0 theta = 10000.0 inverse : {mlir_type(x)}", [y], [mlir_type(x)])
    check(f"rope inverse {tag}", z, ref.rope(y, 10000.0, inverse=True), rtol, atol)
    check(f"rope inverse of rope {tag}", z, x, rtol, atol)

    q = rng.standard_normal((2, 6, 4, 8)).astype(dtype)
    k = rng.standard_normal((2, 6, 2, 8)).astype(dtype)
    v = rng.standard_normal((2, 6, 2, 8)).astype(dtype)
    dout = rng.standard_normal((2, 6, 4, 8)).astype(dtype)
    for causal in (True, False):
        flag = "causal " if causal else ""
        (o,) = run_op(f"train.attention %a0, %a1, %a2 {flag}scale = 0.35 : {mlir_type(q)}, {mlir_type(k)}",
                      [q, k, v], [mlir_type(q)])
        check(f"attention causal={causal} {tag}", o, ref.attention(q, k, v, causal, 0.35), rtol, atol)
        dq, dk, dv = run_op(
            f"train.attention_grad %a0, %a1, %a2, %a3 {flag}scale = 0.35 : {mlir_type(q)}, {mlir_type(k)}",
            [q, k, v, dout], [mlir_type(q), mlir_type(k), mlir_type(k)])
        for name, got, want in zip(("dq", "dk", "dv"), (dq, dk, dv), ref.attention_grad(q, k, v, dout, causal, 0.35)):
            check(f"attention_grad {name} causal={causal} {tag}", got, want, rtol, atol)

    logits = (3 * rng.standard_normal((10, 12))).astype(dtype)
    labels = rng.integers(0, 12, 10).astype(np.int32)
    labels[[2, 5]] = -100
    for reduction, rtype in [("mean", f"tensor<{t}>"), ("sum", f"tensor<{t}>"), ("none", f"tensor<10x{t}>")]:
        for smoothing, z in [(0.0, 0.0), (0.1, 1e-3)]:
            (loss,) = run_op(
                f"train.cross_entropy %a0, %a1 ignore_index = -100 reduction = <{reduction}> "
                f"label_smoothing = {smoothing} z_loss = {z} : {mlir_type(logits)}, {mlir_type(labels)} -> {rtype}",
                [logits, labels], [rtype])
            check(f"cross_entropy {reduction} ls={smoothing} z={z} {tag}", loss,
                  ref.cross_entropy(logits, labels, -100, reduction, smoothing, z), rtol, atol)
    all_ignored = np.full(10, -100, np.int32)
    (loss,) = run_op(
        f"train.cross_entropy %a0, %a1 ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0"
        f" : {mlir_type(logits)}, {mlir_type(all_ignored)} -> tensor<{t}>", [logits, all_ignored], [f"tensor<{t}>"])
    check(f"cross_entropy every label ignored {tag}", loss, np.array(0, dtype), rtol, atol)

print("FAIL" if check.failures else "all decompositions match")
sys.exit(1 if check.failures else 0)
