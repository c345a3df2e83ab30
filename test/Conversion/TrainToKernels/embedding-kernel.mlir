// RUN: loom-opt %s -convert-train-to-kernels=loss-kernels=false -train-decompose | FileCheck %s
// RUN: loom-opt %s -train-decompose | FileCheck %s --check-prefix=LOOP

// The gradient of a [2, 4] batch of ids into a 16 x 6 f32 table: the ids and
// rows are flattened to 8 tokens and handed to the runtime's scatter-add with
// an f32 scratch of one row a token. Without the conversion, train-decompose
// keeps the loop over the tokens.
// CHECK-LABEL: func.func @f32_table
// CHECK-SAME: (%[[G:.+]]: tensor<2x4x6xf32>, %[[IDS:.+]]: tensor<2x4xi32>)
// CHECK-DAG: %[[FLAT_IDS:.+]] = tensor.collapse_shape %[[IDS]] {{\[\[}}0, 1]] : tensor<2x4xi32> into tensor<8xi32>
// CHECK-DAG: %[[FLAT_G:.+]] = tensor.collapse_shape %[[G]] {{\[\[}}0, 1], [2]] : tensor<2x4x6xf32> into tensor<8x6xf32>
// CHECK-DAG: %[[TOKENS:.+]] = arith.constant 8 : i64
// CHECK-DAG: %[[ROWS:.+]] = arith.constant 16 : i64
// CHECK-DAG: %[[WIDTH:.+]] = arith.constant 6 : i64
// CHECK-DAG: %[[TABLE:.+]] = tensor.empty() : tensor<16x6xf32>
// CHECK-DAG: %[[SCRATCH:.+]] = tensor.empty() : tensor<8x6xf32>
// CHECK: %[[R:.+]]:2 = train.call_kernel @loomrt_embedding_grad_f32(%[[TOKENS]], %[[ROWS]], %[[WIDTH]] : i64, i64, i64) ins(%[[FLAT_IDS]], %[[FLAT_G]] : tensor<8xi32>, tensor<8x6xf32>) outs(%[[TABLE]], %[[SCRATCH]] : tensor<16x6xf32>, tensor<8x6xf32>) -> tensor<16x6xf32>, tensor<8x6xf32>
// CHECK-NOT: scf.for
// CHECK: return %[[R]]#0
// LOOP-LABEL: func.func @f32_table
// LOOP-NOT: train.call_kernel
// LOOP: scf.for
func.func @f32_table(%g: tensor<2x4x6xf32>, %ids: tensor<2x4xi32>) -> tensor<16x6xf32> {
  %t = train.embedding_grad %g[%ids] : tensor<2x4x6xf32>, tensor<2x4xi32> -> tensor<16x6xf32>
  return %t : tensor<16x6xf32>
}

// bf16 takes the bf16 entry point; the scratch stays f32.
// CHECK-LABEL: func.func @bf16_table
// CHECK: train.call_kernel @loomrt_embedding_grad_bf16
// CHECK-SAME: ins(%{{.+}}, %{{.+}} : tensor<6xi32>, tensor<6x4xbf16>)
// CHECK-SAME: outs(%{{.+}}, %{{.+}} : tensor<10x4xbf16>, tensor<6x4xf32>)
func.func @bf16_table(%g: tensor<6x4xbf16>, %ids: tensor<6xi32>) -> tensor<10x4xbf16> {
  %t = train.embedding_grad %g[%ids] : tensor<6x4xbf16>, tensor<6xi32> -> tensor<10x4xbf16>
  return %t : tensor<10x4xbf16>
}

// The kernel takes i32 ids and f32 or bf16 tables: i64 ids and an f16 table
// keep the loop.
// CHECK-LABEL: func.func @i64_ids
// CHECK-NOT: train.call_kernel
// CHECK: scf.for
func.func @i64_ids(%g: tensor<6x4xf32>, %ids: tensor<6xi64>) -> tensor<10x4xf32> {
  %t = train.embedding_grad %g[%ids] : tensor<6x4xf32>, tensor<6xi64> -> tensor<10x4xf32>
  return %t : tensor<10x4xf32>
}

// The loop sums a 16-bit table in an f32 one and rounds it once, as the
// kernel does.
// CHECK-LABEL: func.func @f16_table
// CHECK-NOT: train.call_kernel
// CHECK: %[[ZERO:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<10x4xf32>)
// CHECK: %[[SUM:.+]] = scf.for {{.+}} iter_args(%{{.+}} = %[[ZERO]]) -> (tensor<10x4xf32>)
// CHECK: ^bb0(%[[IN:.+]]: f16, %[[OUT:.+]]: f32):
// CHECK-NEXT: %[[WIDE:.+]] = arith.extf %[[IN]] : f16 to f32
// CHECK-NEXT: arith.addf %[[OUT]], %[[WIDE]] : f32
// CHECK: ins(%[[SUM]] : tensor<10x4xf32>) outs(%{{.+}} : tensor<10x4xf16>)
// CHECK: arith.truncf %{{.+}} : f32 to f16
func.func @f16_table(%g: tensor<6x4xf16>, %ids: tensor<6xi32>) -> tensor<10x4xf16> {
  %t = train.embedding_grad %g[%ids] : tensor<6x4xf16>, tensor<6xi32> -> tensor<10x4xf16>
  return %t : tensor<10x4xf16>
}
