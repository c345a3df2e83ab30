// Tests pp-partition on a two-block MLP with a classifier head, its batch in
// two microbatches: one function per stage, each running its schedule's
// actions (train.action) with the sends and receives between them; the last
// stage computes and returns the loss, each stage updates its parameters.
// RUN: loom-opt %s --train-microbatch=microbatches=2 --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 schedule=1f1b layout=t|tL" | FileCheck %s --check-prefix=ONEF
// RUN: loom-opt %s --loom-set-target=device=cpu --pp-partition="stages=2 forward-only layout=t|tL" | FileCheck %s --check-prefix=EVAL
// RUN: loom-opt %s --train-microbatch=microbatches=4 --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 schedule=1f1b layout=t|tL" | FileCheck %s --check-prefix=ONEF4
// RUN: loom-opt %s --train-microbatch=microbatches=2 --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 schedule=gpipe" | FileCheck %s --check-prefix=GPIPE
// RUN: loom-opt %s --train-microbatch=microbatches=2 --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 schedule=zb-h1" | FileCheck %s --check-prefix=ZB
// RUN: loom-opt %s --train-microbatch=microbatches=2 --train-autodiff --train-optimizer="kind=sgd lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=3" | FileCheck %s --check-prefix=THREE
// RUN: loom-opt %s --train-microbatch=microbatches=2 --train-autodiff --train-optimizer="kind=adamw lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 replicas=2 layout=t|tL" | FileCheck %s --check-prefix=GRID
// RUN: loom-opt %s --train-microbatch=microbatches=2 --train-autodiff --train-optimizer="kind=adamw lr=0.1" --loom-set-target=device=cpu --pp-partition="stages=2 replicas=2 layout=t|tL" --zero-partition="stage=2 world-size=2" | FileCheck %s --check-prefix=ZERO
// RUN: loom-opt %S/Inputs/no-locations.mlir --loom-set-target=device=cpu --pp-partition="stages=2 layout=t|tL" | FileCheck %s --check-prefix=NOLOC

// 1F1B on two stages. Stage 0 warms up with one forward, sends each
// microbatch's activation as it is made, and waits each send once the
// gradient that depends on it is back.
// ONEF-LABEL: func.func @mlp_stage0(
// ONEF-SAME: {train.param = "layers.0.w"}
// ONEF-SAME: {train.input = "x"}) -> (tensor<8x8xf32> {train.param = "layers.0.w"})
// ONEF-SAME: train.pipeline = #train.pipeline<stages = 2, microbatches = 2, replicas = 1, schedule = "1f1b", layout = "t|tL">, train.pipeline_stage = 0 : i64
// ONEF: %[[PP:.+]] = coll.comm_world : !coll.comm<2>
// ONEF: %[[H0:.+]] = linalg.matmul {{.*}}train.action = "F0"
// ONEF: %[[S0:.+]] = coll.send_start %[[H0]] on %[[PP]] to = 1 tag = 0 : (tensor<2x8xf32>, !coll.comm<2>) -> !coll.future<tensor<0xf32>>
// ONEF: %[[H1:.+]] = linalg.matmul {{.*}}train.action = "F1"
// ONEF: %[[S1:.+]] = coll.send_start %[[H1]] on %[[PP]] to = 1 tag = 1
// ONEF: %[[R0:.+]] = coll.recv_start on %[[PP]] from = 1 tag = 0 : (!coll.comm<2>) -> !coll.future<tensor<2x8xf32>>
// ONEF-NEXT: coll.wait %[[R0]]
// ONEF-NEXT: coll.wait %[[S0]] : !coll.future<tensor<0xf32>>
// ONEF: train.action = "B0"
// ONEF: coll.recv_start on %[[PP]] from = 1 tag = 1
// ONEF: coll.wait %[[S1]]
// ONEF: train.action = "B1"
// ONEF-NOT: coll.send_start
// ONEF: return

// The last stage alternates: F0 B0 F1 B1, then sums the microbatches' losses
// over the valid labels of both and returns the loss.
// ONEF-LABEL: func.func @mlp_stage1(
// ONEF-SAME: {train.param = "layers.1.w"}
// ONEF-SAME: {train.param = "head"}
// ONEF-SAME: {train.input = "labels"}) -> (tensor<f32> {train.loss}, tensor<8x8xf32> {train.param = "layers.1.w"}, tensor<4x8xf32> {train.param = "head"})
// ONEF-SAME: train.pipeline_stage = 1 : i64
// ONEF: coll.recv_start on %{{.+}} from = 0 tag = 0
// ONEF: train.cross_entropy {{.*}}reduction = <sum>{{.*}}train.action = "F0"
// ONEF: train.cross_entropy_grad {{.*}}train.action = "B0"
// ONEF: coll.send_start {{.*}} to = 0 tag = 0
// ONEF: coll.recv_start on %{{.+}} from = 0 tag = 1
// ONEF: train.cross_entropy {{.*}}train.action = "F1"
// ONEF: arith.divf
// ONEF: train.cross_entropy_grad {{.*}}train.action = "B1"
// ONEF: coll.send_start {{.*}} to = 0 tag = 1
// ONEF: return

// 1F1B with four microbatches: stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3. The
// last stage waits each gradient's send once the activation stage 0 sends
// after using that gradient is in (stage 0 has received it by then), so it
// holds two gradients' sends, not one per microbatch; the last two, with no
// message after them, are waited at the end.
// ONEF4-LABEL: func.func @mlp_stage1(
// ONEF4: %[[G0:.+]] = coll.send_start {{.*}} to = 0 tag = 0
// ONEF4-NOT: coll.wait %[[G0]]
// ONEF4: %[[G1:.+]] = coll.send_start {{.*}} to = 0 tag = 1
// ONEF4-NOT: coll.wait %[[G0]]
// ONEF4: %[[A2:.+]] = coll.recv_start on %{{.+}} from = 0 tag = 2
// ONEF4-NEXT: coll.wait %[[A2]]
// ONEF4-NEXT: coll.wait %[[G0]] : !coll.future<tensor<0xf32>>
// ONEF4-NOT: coll.wait %[[G1]]
// ONEF4: %[[G2:.+]] = coll.send_start {{.*}} to = 0 tag = 2
// ONEF4-NOT: coll.wait %[[G1]]
// ONEF4: %[[A3:.+]] = coll.recv_start on %{{.+}} from = 0 tag = 3
// ONEF4-NEXT: coll.wait %[[A3]]
// ONEF4-NEXT: coll.wait %[[G1]] : !coll.future<tensor<0xf32>>
// ONEF4: %[[G3:.+]] = coll.send_start {{.*}} to = 0 tag = 3
// ONEF4: coll.wait %[[G2]]
// ONEF4-NEXT: coll.wait %[[G3]]
// ONEF4-NEXT: return

// GPipe: every forward, then every backward.
// GPIPE-LABEL: func.func @mlp_stage1(
// GPIPE-SAME: layout = "t|tL"
// GPIPE: train.cross_entropy {{.*}}train.action = "F0"
// GPIPE: train.cross_entropy {{.*}}train.action = "F1"
// GPIPE: train.cross_entropy_grad {{.*}}train.action = "B0"
// GPIPE: coll.send_start {{.*}} to = 0 tag = 0
// GPIPE: train.cross_entropy_grad {{.*}}train.action = "B1"
// GPIPE: coll.send_start {{.*}} to = 0 tag = 1

// ZB-H1: the last stage's backward is split; what stage 0 waits for (I) is
// sent before the weight gradients (W) are computed, and stage 1 defers its
// W's by one step (F0 I0 F1 I1 W0 W1). Stage 0 sends nothing back, so all
// of its backward is W.
// ZB-LABEL: func.func @mlp_stage0(
// ZB-NOT: train.action = "I
// ZB-NOT: train.action = "B
// ZB: train.action = "W0"
// ZB-LABEL: func.func @mlp_stage1(
// ZB: train.cross_entropy_grad {{.*}}train.action = "I0"
// ZB: coll.send_start {{.*}} to = 0 tag = 0
// ZB-NOT: train.action = "W0"
// ZB: train.action = "F1"
// ZB-NOT: train.action = "W0"
// ZB: train.action = "I1"
// ZB: coll.send_start {{.*}} to = 0 tag = 1
// ZB-NOT: train.action = "W1"
// ZB: train.action = "W0"
// ZB: train.action = "W1"

// Balanced on the cost model, three units on three stages.
// THREE: func.func @mlp_stage0({{.*}}"layers.0.w"{{.*}}train.pipeline = #train.pipeline<stages = 3, microbatches = 2, replicas = 1, schedule = "1f1b", layout = "t|t|L">
// THREE: func.func @mlp_stage1(%arg0: tensor<8x8xf32> {train.param = "layers.1.w"}) -> (tensor<8x8xf32> {train.param = "layers.1.w"})
// THREE: coll.recv_start {{.*}} from = 0
// THREE: coll.send_start {{.*}} to = 2
// THREE: func.func @mlp_stage2(%arg0: tensor<4x8xf32> {train.param = "head"}, %arg1: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}

func.func @mlp(%w0: tensor<8x8xf32> {train.param = "layers.0.w"},
               %w1: tensor<8x8xf32> {train.param = "layers.1.w"},
               %head: tensor<4x8xf32> {train.param = "head"},
               %x: tensor<4x8xf32> {train.input = "x"},
               %labels: tensor<4xi32> {train.input = "labels"}) -> (tensor<f32> {train.loss}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h0 = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h1 = linalg.matmul ins(%h0, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %el = tensor.empty() : tensor<4x4xf32>
  %zl = linalg.fill ins(%zero : f32) outs(%el : tensor<4x4xf32>) -> tensor<4x4xf32>
  %logits = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%h1, %head : tensor<4x8xf32>, tensor<4x8xf32>) outs(%zl : tensor<4x4xf32>) -> tensor<4x4xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<4x4xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// Two replicas of the two-stage pipeline: a world of 4 ranks, rank s * 2 + d
// running stage s of replica d; the transfers run on the replica's pipeline
// (ranks d and 2 + d), made at the entry.
// GRID-LABEL: func.func @mlp_stage0(
// GRID-SAME: replicas = 2,
// GRID-NEXT: %[[W:.+]] = coll.comm_world : !coll.comm<4>
// GRID-NEXT: %[[PP:.+]] = coll.comm_group %[[W]] size = 2 stride = 2 : !coll.comm<4> -> !coll.comm<2>
// GRID: coll.send_start %{{.+}} on %[[PP]] to = 1 tag = 0
// GRID-LABEL: func.func @mlp_stage1(
// GRID-NEXT: %[[W1:.+]] = coll.comm_world : !coll.comm<4>
// GRID-NEXT: %[[PP1:.+]] = coll.comm_group %[[W1]] size = 2 stride = 2
// GRID: coll.recv_start on %[[PP1]] from = 0 tag = 0

// ZeRO-2 over each stage's replicas (ranks 2s and 2s + 1): the optimizer
// state is sharded on that group, the gradients reduce-scattered on it and
// the updated parameters gathered; the transfers stay on the pipeline's
// group, and only the last stage averages a loss over its replicas.
// ZERO-LABEL: func.func @mlp_stage0(
// ZERO-SAME: tensor<32xf32> {train.full_shape = array<i64: 8, 8>, train.state = "layers.0.w.m"}
// ZERO-SAME: train.zero_stage = 2
// ZERO-NEXT: %[[W:.+]] = coll.comm_world : !coll.comm<4>
// ZERO-NEXT: %[[DP:.+]] = coll.comm_group %[[W]] size = 2 stride = 1 : !coll.comm<4> -> !coll.comm<2>
// ZERO-NEXT: coll.comm_rank %[[DP]]
// ZERO: %[[PP:.+]] = coll.comm_group %[[W]] size = 2 stride = 2
// ZERO: coll.send_start %{{.+}} on %[[PP]]
// ZERO: coll.reduce_scatter_start %{{.+}} on %[[DP]]
// ZERO: coll.all_gather_start %{{.+}} on %[[DP]]
// ZERO-NOT: coll.all_reduce_start
// ZERO: return
// ZERO-LABEL: func.func @mlp_stage1(
// ZERO: %[[DP1:.+]] = coll.comm_group %{{.+}} size = 2 stride = 1
// ZERO: coll.all_reduce_start %{{.+}} on %[[DP1]] reduction = <avg>
// ZERO: return

// Without locations a backward op's stage comes from the values it reads;
// a gradient the step returns is computed on its parameter's stage, which
// returns it, and receives what it reads from other stages (layers.0.w's
// gradient reads the input gradient layers.1 makes on stage 1).
// NOLOC-LABEL: func.func @mlp_stage0(
// NOLOC-SAME: {train.param = "layers.0.w"}
// NOLOC-SAME: -> (tensor<8x8xf32> {train.grad = "layers.0.w"})
// NOLOC: coll.recv_start {{.*}} from = 1
// NOLOC-LABEL: func.func @mlp_stage1(
// NOLOC-SAME: {train.param = "layers.1.w"}
// NOLOC-SAME: -> (tensor<f32> {train.loss}, tensor<8x8xf32> {train.grad = "layers.1.w"}, tensor<4x8xf32> {train.grad = "head"})

// The forward alone (the trainer's evaluation step), cut by the training
// step's layout: stage 0 sends its activation and returns nothing, stage 1
// receives it and returns the loss; no gradients.
// EVAL-LABEL: func.func @mlp_stage0(
// EVAL-SAME: train.param = "layers.0.w"
// EVAL: coll.send_start {{.*}} to = 1 tag = 0
// EVAL: coll.wait
// EVAL-NEXT: return{{$}}
// EVAL-LABEL: func.func @mlp_stage1(
// EVAL-SAME: -> (tensor<f32> {train.loss})
// EVAL: coll.recv_start on %{{.*}} from = 0 tag = 0
// EVAL-NOT: train.grad
// EVAL: return %{{.*}} : tensor<f32>
