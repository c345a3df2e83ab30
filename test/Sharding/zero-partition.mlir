// Tests zero-partition stages 1, 2 and 3 on a one-parameter SGD step over 4
// ranks. The parameter has 10 elements, so each shard holds 3 and the
// flattened tensor is padded to 12.
// RUN: loom-opt %s -train-autodiff -train-optimizer="kind=sgd lr=0.1" -zero-partition="stage=3 world-size=4" | FileCheck %s --check-prefix=STAGE3
// RUN: loom-opt %s -train-autodiff -train-optimizer="kind=sgd lr=0.1" -zero-partition="stage=2 world-size=4" | FileCheck %s --check-prefix=STAGE2
// RUN: loom-opt %s -train-autodiff -train-optimizer="kind=sgd lr=0.1" -zero-partition="stage=1 world-size=4" | FileCheck %s --check-prefix=STAGE1
// RUN: loom-opt %S/Inputs/gradient-read-by-forward.mlir -train-autodiff -train-optimizer="kind=sgd lr=0.1" -zero-partition="stage=2 world-size=4" | FileCheck %s --check-prefix=SHARED

// Stage 2 frees a gradient the forward reads too (a zero fill, when the loss
// does not read the parameter) after the forward's last read of it.
// SHARED: %[[G:.+]] = linalg.fill
// SHARED: coll.reduce_scatter_start %[[G]]
// SHARED: linalg.reduce ins(%[[G]]
// SHARED: coll.release %[[G]]

// loss = sum(w * w * x): the backward reads w again.
func.func @step(%w: tensor<2x5xf32> {train.param = "w"}, %x: tensor<2x5xf32> {train.input})
    -> (tensor<f32> {train.loss}) {
  %e = tensor.empty() : tensor<2x5xf32>
  %w2 = linalg.mul ins(%w, %w : tensor<2x5xf32>, tensor<2x5xf32>) outs(%e : tensor<2x5xf32>) -> tensor<2x5xf32>
  %m = linalg.mul ins(%w2, %x : tensor<2x5xf32>, tensor<2x5xf32>) outs(%e : tensor<2x5xf32>) -> tensor<2x5xf32>
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%m : tensor<2x5xf32>) outs(%f : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

// Stage 3: the parameter arrives and leaves as this rank's shard, tagged
// with its whole shape for the trainer; the function records the stage.
// STAGE3-LABEL: func.func @step
// STAGE3-SAME: (%[[W:.+]]: tensor<3xf32> {train.full_shape = array<i64: 2, 5>, train.param = "w"}, %[[X:.+]]: tensor<2x5xf32> {train.input})
// STAGE3-SAME: -> (tensor<f32> {train.loss}, tensor<3xf32> {train.full_shape = array<i64: 2, 5>, train.param = "w"})
// STAGE3-SAME: attributes {{{.*}}train.zero_stage = 3 : i64}
// STAGE3: %[[COMM:.+]] = coll.comm_world : !coll.comm<4>
// Forward: gather, drop the padding, restore the shape, use, release.
// STAGE3: %[[F1:.+]] = coll.all_gather_start %[[W]] on %[[COMM]] gather_axis = 0 : (tensor<3xf32>, !coll.comm<4>) -> !coll.future<tensor<12xf32>>
// STAGE3: %[[G1:.+]] = coll.wait %[[F1]]
// STAGE3: %[[S1:.+]] = tensor.extract_slice %[[G1]][0] [10] [1] : tensor<12xf32> to tensor<10xf32>
// STAGE3: %[[W1:.+]] = tensor.expand_shape %[[S1]] {{\[\[}}0, 1]] output_shape [2, 5]
// STAGE3: linalg.mul ins(%[[W1]], %[[W1]]
// STAGE3: coll.release %[[G1]] : tensor<12xf32>
// Backward: gathered again for its own region.
// STAGE3: %[[F2:.+]] = coll.all_gather_start %[[W]]
// STAGE3: %[[G2:.+]] = coll.wait %[[F2]]
// STAGE3: coll.release %[[G2]]
// The gradient is padded and reduce-scattered as soon as it exists.
// STAGE3: %[[PAD:.+]] = tensor.insert_slice %{{.+}} into %{{.+}}[0] [10] [1] : tensor<10xf32> into tensor<12xf32>
// STAGE3: %[[RS:.+]] = coll.reduce_scatter_start %[[PAD]] on %[[COMM]] scatter_axis = 0 reduction = <avg> : (tensor<12xf32>, !coll.comm<4>) -> !coll.future<tensor<3xf32>>
// STAGE3: %[[GS:.+]] = coll.wait %[[RS]]
// The update runs on shards; the loss is averaged over the ranks.
// STAGE3: %[[NEW:.+]] = linalg.generic {{.*}} ins(%[[W]], %[[GS]] : tensor<3xf32>, tensor<3xf32>) outs(%{{.+}} : tensor<3xf32>)
// STAGE3: %[[AR:.+]] = coll.all_reduce_start %{{.+}} on %[[COMM]] reduction = <avg> : (tensor<f32>, !coll.comm<4>)
// STAGE3: %[[LOSS:.+]] = coll.wait %[[AR]]
// STAGE3: return %[[LOSS]], %[[NEW]] : tensor<f32>, tensor<3xf32>

// Stage 2: the parameter stays whole; this rank updates its slice and the
// slices are gathered back; the full gradient dies once its reduce-scatter
// has started.
// STAGE2-LABEL: func.func @step
// STAGE2-SAME: (%[[W:.+]]: tensor<2x5xf32> {train.param = "w"}, %{{.+}}: tensor<2x5xf32> {train.input})
// STAGE2-SAME: -> (tensor<f32> {train.loss}, tensor<2x5xf32> {train.param = "w"})
// STAGE2-SAME: attributes {{{.*}}train.zero_stage = 2 : i64}
// STAGE2: %[[COMM:.+]] = coll.comm_world : !coll.comm<4>
// STAGE2: %[[RANK:.+]] = coll.comm_rank %[[COMM]] : !coll.comm<4>
// This rank's slice of the whole parameter: elements [3 r, 3 r + 3).
// STAGE2: %[[OFF:.+]] = arith.muli %[[RANK]], %{{.+}} : index
// STAGE2: %[[MINE:.+]] = tensor.extract_slice %{{.+}}[%[[OFF]]] [3] [1] : tensor<12xf32> to tensor<3xf32>
// STAGE2-NOT: coll.all_gather_start
// STAGE2: %[[RS:.+]] = coll.reduce_scatter_start %[[PAD:.+]] on %[[COMM]]
// STAGE2-NEXT: coll.release %[[PAD]] : tensor<12xf32>
// STAGE2: %[[GS:.+]] = coll.wait %[[RS]]
// STAGE2: %[[NEW:.+]] = linalg.generic {{.*}} ins(%[[MINE]], %[[GS]] : tensor<3xf32>, tensor<3xf32>)
// STAGE2: %[[AG:.+]] = coll.all_gather_start %[[NEW]] on %[[COMM]] gather_axis = 0 : (tensor<3xf32>, !coll.comm<4>) -> !coll.future<tensor<12xf32>>
// STAGE2: %[[FULL:.+]] = coll.wait %[[AG]]
// STAGE2: tensor.extract_slice %[[FULL]][0] [10] [1]
// STAGE2: %[[NW:.+]] = tensor.expand_shape
// STAGE2: return %{{.+}}, %[[NW]] : tensor<f32>, tensor<2x5xf32>

// Stage 1: as stage 2, but the full gradient lives to the end of the step.
// STAGE1-LABEL: func.func @step
// STAGE1: %[[RS:.+]] = coll.reduce_scatter_start %[[PAD:.+]] on
// STAGE1-NOT: coll.release %[[PAD]]
// STAGE1: coll.all_gather_start
// STAGE1: coll.release %[[PAD]] : tensor<12xf32>
// STAGE1-NEXT: return

