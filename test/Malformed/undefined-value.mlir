// Tests that a use of an undefined future is a diagnostic.
// RUN: not loom-opt %s 2>&1 | FileCheck %s
// CHECK: error: use of undeclared SSA value name
func.func @f() -> tensor<4xf32> {
  %w = coll.wait %nowhere : !coll.future<tensor<4xf32>>
  return %w : tensor<4xf32>
}
