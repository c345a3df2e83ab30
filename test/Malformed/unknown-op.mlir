// Tests that an op the coll dialect does not define is reported by name.
// RUN: not loom-opt %s 2>&1 | FileCheck %s
// CHECK: error: custom op 'coll.all_to_all_start' is unknown
func.func @f(%c: !coll.comm<2>, %x: tensor<4xf32>) {
  %f = coll.all_to_all_start %x on %c : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<4xf32>>
  return
}
