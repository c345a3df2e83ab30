# Tests that loom.run_opt returns loom-opt's output and turns diagnostics into
# a LoomOptError that carries them.
# RUN: %python %s | FileCheck %s

from loom import LoomOptError, run_opt

GOOD = """
func.func @f(%c: !coll.comm<1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %f = coll.all_reduce_start %x on %c reduction = <sum> : (tensor<4xf32>, !coll.comm<1>) -> !coll.future<tensor<4xf32>>
  %w = coll.wait %f : !coll.future<tensor<4xf32>>
  return %w : tensor<4xf32>
}
"""

# CHECK: folded: True
out = run_opt(GOOD, ["--canonicalize"])
print("folded:", "coll.wait" not in out and "return %arg1" in out)

# CHECK: error caught: <stdin>:3:8: error: 'coll.all_reduce_start' op expected the future to be waited in its block, found no 'coll.wait'
# CHECK-NOT: no error
try:
    run_opt(GOOD.replace("  %w = coll.wait %f : !coll.future<tensor<4xf32>>\n", "").replace("%w", "%x"))
    print("no error")
except LoomOptError as err:
    print("error caught:", err.diagnostics.splitlines()[0])
