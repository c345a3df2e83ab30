//===- Passes.td - CPU codegen -----------------------------*- tablegen -*-===//
//
// The CPU target's codegen: linalg ops BLAS does not take, as vector loops.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_CPU_PASSES_TD
#define LOOM_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def CpuVectorizePass : Pass<"cpu-vectorize", "::mlir::func::FuncOp"> {
  let summary = "Tiles and vectorises linalg ops on buffers into vector loops";
  let description = [{
    Runs on bufferised IR after `convert-linalg-to-blas`. For every linalg
    op with static shapes whose body the linalg vectorizer handles, picks
    the innermost loop dimension that every operand reads contiguously (as
    its unit-stride last dimension) or not at all, tiles that dimension to
    a vector of up to `vector-bytes` (the largest power of two that divides
    it, or all of it when it fits) and every other dimension to 1, and
    vectorises the tile. Unit dimensions are then folded, transfers become
    `vector.load`/`vector.store`, and multi-reductions become ordered
    `vector.reduction`s, so the result is bit-identical to the scalar
    loops. Ops with no such dimension (a transposed operand, a gather), and
    ops whose vector dimension is a reduction followed by another (moving
    it innermost would reorder the additions), are left to
    `convert-linalg-to-loops`. The function gets `loom.vectorized_ops` and
    `loom.scalar_ops` (and the pass's statistics `vectorized-ops` and
    `scalar-ops`): how many linalg ops became vector loops and how many were
    left.

    ```mlir
    linalg.generic {indexing_maps = [#id, #id, #id],
                    iterator_types = ["parallel", "parallel"]}
        ins(%a, %b : memref<8x64xf32>, memref<8x64xf32>)
        outs(%c : memref<8x64xf32>) {
    ^bb0(%x: f32, %y: f32, %z: f32):
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
    }
    // becomes (vector-bytes=64: 16 f32 lanes)
    scf.for %i = %c0 to %c8 step %c1 {
      scf.for %j = %c0 to %c64 step %c16 {
        %va = vector.load %a[%i, %j] : memref<8x64xf32>, vector<16xf32>
        %vb = vector.load %b[%i, %j] : memref<8x64xf32>, vector<16xf32>
        %vs = arith.addf %va, %vb : vector<16xf32>
        vector.store %vs, %c[%i, %j] : memref<8x64xf32>, vector<16xf32>
      }
    }
    ```
  }];
  let options = [
    Option<"vectorBytes", "vector-bytes", "int64_t", /*default=*/"64",
           "Bytes in one vector (64: AVX-512; LLVM splits them for AVX2)">,
    Option<"minLanes", "min-lanes", "int64_t", /*default=*/"4",
           "Leave dimensions with fewer lanes than this to scalar loops">,
  ];

  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
  let statistics = [
    Statistic<"numVectorized", "vectorized-ops", "Linalg ops that became vector loops">,
    Statistic<"numScalar", "scalar-ops", "Linalg ops left to scalar loops">
  ];
}

#endif // LOOM_CODEGEN_CPU_PASSES_TD
