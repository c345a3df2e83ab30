// Tests that a file cut off in the middle of a function is a diagnostic and a
// non-zero exit, not a crash.
// RUN: not loom-opt %s 2>&1 | FileCheck %s
// CHECK: error: expected operation name in quotes
func.func @cut(%c: !coll.comm<2>, %x: tensor<4xf32>) -> tensor<8xf32> {
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
