// Tests that waiting on something that is not a future is a type error.
// RUN: not loom-opt %s 2>&1 | FileCheck %s
// CHECK: error: custom op 'coll.wait' 'future' must be future type, but got 'tensor<4xf32>'
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = coll.wait %x : tensor<4xf32>
  return %w : tensor<4xf32>
}
