// Tests coll-bucket on the cpu device (devices/cpu.json: a 4096-element f32
// reduce-scatter over 4 ranks takes about 8 us, an exp over 1M elements
// about 0.9 ms).
// RUN: loom-opt %s -split-input-file --loom-set-target=device=cpu -coll-bucket | FileCheck %s
// RUN: loom-opt %s -split-input-file --loom-set-target=device=cpu -coll-bucket="first-bucket-mb=0.015 bucket-mb=0.015" | FileCheck %s --check-prefix=SMALL

// Two gradients ready one after the other, waited after plenty of compute:
// one bucket, launched after the second gradient (the last producer in the
// current order, although it belongs to the first argument). Each result is
// this rank's slice of the rank-major merged buffer.
// CHECK-LABEL: func.func @ready_order
// SMALL-LABEL: func.func @ready_order
func.func @ready_order(%a: tensor<4096xf32>, %b: tensor<1024xf32>, %x: tensor<1048576xf32>, %c: !coll.comm<4>)
    -> (tensor<1024xf32>, tensor<256xf32>, tensor<1048576xf32>) {
  %e1 = tensor.empty() : tensor<1024xf32>
  // CHECK: %[[G2:.+]] = linalg.exp ins(%{{.+}} : tensor<1024xf32>)
  %g2 = linalg.exp ins(%b : tensor<1024xf32>) outs(%e1 : tensor<1024xf32>) -> tensor<1024xf32>
  %f2 = coll.reduce_scatter_start %g2 on %c scatter_axis = 0 reduction = <avg> : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<256xf32>>
  %e4 = tensor.empty() : tensor<4096xf32>
  // CHECK: %[[G1:.+]] = linalg.exp ins(%{{.+}} : tensor<4096xf32>)
  %g1 = linalg.exp ins(%a : tensor<4096xf32>) outs(%e4 : tensor<4096xf32>) -> tensor<4096xf32>
  // CHECK-NOT: coll.reduce_scatter_start
  // CHECK: %[[R2:.+]] = tensor.expand_shape %[[G2]] {{\[\[}}0, 1]] output_shape [4, 256]
  // CHECK: %[[R1:.+]] = tensor.expand_shape %[[G1]] {{\[\[}}0, 1]] output_shape [4, 1024]
  // CHECK: %[[M:.+]] = tensor.concat dim(1) %[[R2]], %[[R1]] : (tensor<4x256xf32>, tensor<4x1024xf32>) -> tensor<4x1280xf32>
  // CHECK: %[[FLAT:.+]] = tensor.collapse_shape %[[M]] {{\[\[}}0, 1]] : tensor<4x1280xf32> into tensor<5120xf32>
  // CHECK: %[[F:.+]] = coll.reduce_scatter_start %[[FLAT]] on %{{.+}} scatter_axis = 0 reduction = <avg> : (tensor<5120xf32>, !coll.comm<4>) -> !coll.future<tensor<1280xf32>>
  // CHECK-NOT: coll.reduce_scatter_start
  %f1 = coll.reduce_scatter_start %g1 on %c scatter_axis = 0 reduction = <avg> : (tensor<4096xf32>, !coll.comm<4>) -> !coll.future<tensor<1024xf32>>
  %ex = tensor.empty() : tensor<1048576xf32>
  %big = linalg.exp ins(%x : tensor<1048576xf32>) outs(%ex : tensor<1048576xf32>) -> tensor<1048576xf32>
  // CHECK: %[[W:.+]] = coll.wait %[[F]]
  // CHECK-DAG: tensor.extract_slice %[[W]][0] [256] [1] : tensor<1280xf32> to tensor<256xf32>
  // CHECK-DAG: tensor.extract_slice %[[W]][256] [1024] [1] : tensor<1280xf32> to tensor<1024xf32>
  %w1 = coll.wait %f1 : !coll.future<tensor<1024xf32>>
  %w2 = coll.wait %f2 : !coll.future<tensor<256xf32>>
  return %w1, %w2, %big : tensor<1024xf32>, tensor<256xf32>, tensor<1048576xf32>
}
// With 0.015 MiB buckets (15,729 bytes) the 4 KiB and 16 KiB gradients do
// not fit together: two collectives.
// SMALL-COUNT-2: coll.reduce_scatter_start
// SMALL-NOT: coll.reduce_scatter_start

// -----

// The first reduce-scatter hides under the big exp, and its wait comes right
// after the second gradient: merging would launch it too late and expose it,
// so the two stay apart.
// CHECK-LABEL: func.func @keeps_hidden_collective
// SMALL-LABEL: func.func @keeps_hidden_collective
func.func @keeps_hidden_collective(%a: tensor<4096xf32>, %b: tensor<4096xf32>, %x: tensor<1048576xf32>, %c: !coll.comm<4>)
    -> (tensor<1024xf32>, tensor<1024xf32>, tensor<1048576xf32>) {
  %e4 = tensor.empty() : tensor<4096xf32>
  %g1 = linalg.exp ins(%a : tensor<4096xf32>) outs(%e4 : tensor<4096xf32>) -> tensor<4096xf32>
  // CHECK: coll.reduce_scatter_start %{{.+}} : (tensor<4096xf32>, !coll.comm<4>)
  %f1 = coll.reduce_scatter_start %g1 on %c scatter_axis = 0 reduction = <avg> : (tensor<4096xf32>, !coll.comm<4>) -> !coll.future<tensor<1024xf32>>
  %ex = tensor.empty() : tensor<1048576xf32>
  %big = linalg.exp ins(%x : tensor<1048576xf32>) outs(%ex : tensor<1048576xf32>) -> tensor<1048576xf32>
  %g2 = linalg.exp ins(%b : tensor<4096xf32>) outs(%e4 : tensor<4096xf32>) -> tensor<4096xf32>
  // CHECK: coll.reduce_scatter_start %{{.+}} : (tensor<4096xf32>, !coll.comm<4>)
  %f2 = coll.reduce_scatter_start %g2 on %c scatter_axis = 0 reduction = <avg> : (tensor<4096xf32>, !coll.comm<4>) -> !coll.future<tensor<1024xf32>>
  %w1 = coll.wait %f1 : !coll.future<tensor<1024xf32>>
  %w2 = coll.wait %f2 : !coll.future<tensor<1024xf32>>
  return %w1, %w2, %big : tensor<1024xf32>, tensor<1024xf32>, tensor<1048576xf32>
}

// -----

// Released inputs (ZeRO-2) become one release of the merged input.
// CHECK-LABEL: func.func @merged_release
func.func @merged_release(%a: tensor<16xf32>, %b: tensor<16xf32>, %x: tensor<1048576xf32>, %c: !coll.comm<4>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<1048576xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  %g1 = linalg.exp ins(%a : tensor<16xf32>) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %f1 = coll.reduce_scatter_start %g1 on %c scatter_axis = 0 reduction = <sum> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  coll.release %g1 : tensor<16xf32>
  %g2 = linalg.exp ins(%b : tensor<16xf32>) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  // CHECK: %[[FLAT:.+]] = tensor.collapse_shape
  // CHECK: coll.reduce_scatter_start %[[FLAT]] {{.*}} reduction = <sum>
  // CHECK-NEXT: coll.release %[[FLAT]] : tensor<32xf32>
  // CHECK-NOT: coll.release
  %f2 = coll.reduce_scatter_start %g2 on %c scatter_axis = 0 reduction = <sum> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  coll.release %g2 : tensor<16xf32>
  %ex = tensor.empty() : tensor<1048576xf32>
  %big = linalg.exp ins(%x : tensor<1048576xf32>) outs(%ex : tensor<1048576xf32>) -> tensor<1048576xf32>
  %w1 = coll.wait %f1 : !coll.future<tensor<4xf32>>
  %w2 = coll.wait %f2 : !coll.future<tensor<4xf32>>
  return %w1, %w2, %big : tensor<4xf32>, tensor<4xf32>, tensor<1048576xf32>
}

// -----

// A member released before the last member starts: the merged input is
// released once the merged collective has started, not before.
// CHECK-LABEL: func.func @early_release
func.func @early_release(%a: tensor<16xf32>, %b: tensor<16xf32>, %x: tensor<1048576xf32>, %c: !coll.comm<4>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<1048576xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  %g1 = linalg.exp ins(%a : tensor<16xf32>) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %f1 = coll.reduce_scatter_start %g1 on %c scatter_axis = 0 reduction = <sum> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  coll.release %g1 : tensor<16xf32>
  %g2 = linalg.exp ins(%b : tensor<16xf32>) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  // CHECK: %[[FLAT:.+]] = tensor.collapse_shape
  // CHECK: coll.reduce_scatter_start %[[FLAT]] {{.*}} reduction = <sum>
  // CHECK-NEXT: coll.release %[[FLAT]] : tensor<32xf32>
  // CHECK-NOT: coll.release
  %f2 = coll.reduce_scatter_start %g2 on %c scatter_axis = 0 reduction = <sum> : (tensor<16xf32>, !coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %ex = tensor.empty() : tensor<1048576xf32>
  %big = linalg.exp ins(%x : tensor<1048576xf32>) outs(%ex : tensor<1048576xf32>) -> tensor<1048576xf32>
  %w1 = coll.wait %f1 : !coll.future<tensor<4xf32>>
  %w2 = coll.wait %f2 : !coll.future<tensor<4xf32>>
  return %w1, %w2, %big : tensor<4xf32>, tensor<4xf32>, tensor<1048576xf32>
}

// -----

// All-gathers that start together and are released together merge; one
// released elsewhere does not.
// CHECK-LABEL: func.func @gathers
func.func @gathers(%p: tensor<8xf32>, %q: tensor<2xf32>, %r: tensor<8xf32>, %c: !coll.comm<4>) -> (tensor<32xf32>) {
  // CHECK: %[[CAT:.+]] = tensor.concat dim(0) %{{.+}}, %{{.+}} : (tensor<8xf32>, tensor<2xf32>) -> tensor<10xf32>
  // CHECK: %[[F:.+]] = coll.all_gather_start %[[CAT]] {{.*}} -> !coll.future<tensor<40xf32>>
  // CHECK: coll.all_gather_start %{{.+}} : (tensor<8xf32>, !coll.comm<4>) -> !coll.future<tensor<32xf32>>
  %f1 = coll.all_gather_start %p on %c gather_axis = 0 : (tensor<8xf32>, !coll.comm<4>) -> !coll.future<tensor<32xf32>>
  %f2 = coll.all_gather_start %q on %c gather_axis = 0 : (tensor<2xf32>, !coll.comm<4>) -> !coll.future<tensor<8xf32>>
  %f3 = coll.all_gather_start %r on %c gather_axis = 0 : (tensor<8xf32>, !coll.comm<4>) -> !coll.future<tensor<32xf32>>
  // CHECK: %[[W:.+]] = coll.wait %[[F]]
  // CHECK: %[[M:.+]] = tensor.expand_shape %[[W]] {{\[\[}}0, 1]] output_shape [4, 10]
  // CHECK: tensor.extract_slice %[[M]][0, 0] [4, 8] [1, 1]
  // CHECK: tensor.extract_slice %[[M]][0, 8] [4, 2] [1, 1]
  %w1 = coll.wait %f1 : !coll.future<tensor<32xf32>>
  %w2 = coll.wait %f2 : !coll.future<tensor<8xf32>>
  %w3 = coll.wait %f3 : !coll.future<tensor<32xf32>>
  %e = tensor.empty() : tensor<32xf32>
  %s = linalg.add ins(%w1, %w3 : tensor<32xf32>, tensor<32xf32>) outs(%e : tensor<32xf32>) -> tensor<32xf32>
  // CHECK: coll.release %{{.+}} : tensor<32xf32>
  coll.release %w3 : tensor<32xf32>
  %t = tensor.extract_slice %w2[0] [1] [1] : tensor<8xf32> to tensor<1xf32>
  // CHECK: coll.release %[[W]] : tensor<40xf32>
  // CHECK-NOT: coll.release
  coll.release %w1 : tensor<32xf32>
  coll.release %w2 : tensor<8xf32>
  return %s : tensor<32xf32>
}
