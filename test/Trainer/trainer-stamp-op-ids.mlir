// Tests trainer-stamp-op-ids: every top-level op gets a "loom.op.<id>"
// location around its own, in order across functions, terminators included;
// nested ops keep theirs; stamping again renumbers instead of nesting; and
// the ids stay with their ops when the scheduler reorders the collectives.
// RUN: loom-opt %s -trainer-stamp-op-ids -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s
// RUN: loom-opt %s -trainer-stamp-op-ids -trainer-stamp-op-ids -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s
// RUN: loom-opt %s -trainer-stamp-op-ids -coll-reorder-baseline=policy=synchronous -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s --check-prefix=MOVED

// CHECK-LABEL: func.func @first
// CHECK: coll.comm_world {{.*}}loc("loom.op.0"("ids.mlir":10:3))
// CHECK: coll.all_gather_start {{.*}}loc("loom.op.1"("ids.mlir":11:3))
// CHECK: linalg.generic
// CHECK: math.exp {{.*}}loc("ids.mlir":14:5)
// CHECK: linalg.yield {{.*}}loc("ids.mlir":15:5)
// CHECK: } -> tensor<4xf32> loc("loom.op.2"("ids.mlir":13:3))
// CHECK: coll.wait {{.*}}loc("loom.op.3"("ids.mlir":17:3))
// CHECK: return {{.*}}loc("loom.op.4"("ids.mlir":18:3))
// CHECK-LABEL: func.func @second
// CHECK: math.exp {{.*}}loc("loom.op.5"("{{.*}}trainer-stamp-op-ids.mlir":{{[0-9]+}}:{{[0-9]+}}))
// CHECK: return {{.*}}loc("loom.op.6"(

// The synchronous order starts the gather where it is waited for, after the
// generic; the start's id moves with it.
// MOVED: linalg.generic
// MOVED: } -> tensor<4xf32> loc("loom.op.2"(
// MOVED-NEXT: coll.all_gather_start {{.*}}loc("loom.op.1"(
// MOVED-NEXT: coll.wait {{.*}}loc("loom.op.3"(

#map = affine_map<(d0) -> (d0)>
func.func @first(%s: tensor<2xf32>, %a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = coll.comm_world : !coll.comm<2> loc("ids.mlir":10:3)
  %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<2xf32>, !coll.comm<2>) -> !coll.future<tensor<4xf32>> loc("ids.mlir":11:3)
  %e = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%a : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    %z = math.exp %x : f32 loc("ids.mlir":14:5)
    linalg.yield %z : f32 loc("ids.mlir":15:5)
  } -> tensor<4xf32> loc("ids.mlir":13:3)
  %w = coll.wait %f : !coll.future<tensor<4xf32>> loc("ids.mlir":17:3)
  return %e, %w : tensor<4xf32>, tensor<4xf32> loc("ids.mlir":18:3)
}

func.func @second(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = math.exp %a : tensor<4xf32>
  return %e : tensor<4xf32>
}
