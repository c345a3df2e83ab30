// Tests pp-partition on a tied embedding (one table embeds the tokens on
// stage 0 and projects the output on stage 1): stage 0 sends the table
// before the activations, stage 1 reads the copy it receives and sends back
// its part of the table's gradient, which stage 0 adds to the embedding's
// before the one update, on stage 0.
// RUN: loom-opt %S/Inputs/tied.mlir --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 layout=E|t" | FileCheck %s

// CHECK-LABEL: func.func @tied_stage0(
// CHECK-SAME: %[[TABLE:.+]]: tensor<16x8xf32> {train.param = "embed"}
// CHECK: %[[COPY:.+]] = tensor.cast %[[TABLE]] {{.*}}: tensor<16x8xf32> to tensor<16x8xf32>
// CHECK: coll.send_start %[[COPY]] on %{{.+}} to = 1 tag = 0
// CHECK: %[[X:.+]] = train.embedding %[[TABLE]]
// CHECK: coll.send_start %[[X]] on %{{.+}} to = 1 tag = 1
// CHECK: %[[PART:.+]] = coll.recv_start on %{{.+}} from = 1 tag = 0 : (!coll.comm<2>) -> !coll.future<tensor<16x8xf32>>
// CHECK: %[[HEAD:.+]] = coll.wait %[[PART]]
// CHECK: %[[EMB:.+]] = train.embedding_grad
// CHECK: %[[SUM:.+]] = linalg.generic {{.*}} ins(%[[HEAD]], %[[EMB]] :
// CHECK: linalg.generic {{.*}} ins(%[[TABLE]], %[[SUM]] : {{.*}} attrs = {train.action = "B0", train.update}
// CHECK-LABEL: func.func @tied_stage1(
// CHECK-NOT: train.param = "embed"
// CHECK: %[[RECV:.+]] = coll.recv_start on %{{.+}} from = 0 tag = 0 : (!coll.comm<2>) -> !coll.future<tensor<16x8xf32>>
// CHECK: %[[T:.+]] = coll.wait %[[RECV]]
// CHECK: linalg.matmul {{.*}} ins(%{{.+}}, %[[T]] : tensor<4x8xf32>, tensor<16x8xf32>)
// CHECK: %[[DT:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<16x8xf32>)
// CHECK: coll.send_start %[[DT]] on %{{.+}} to = 0 tag = 0
