//===- Passes.td - conversions to runtime calls ------------*- tablegen -*-===//
//
// Conversions of ops into calls: collectives to the loomrt runtime,
// contractions to BLAS, train ops to runtime kernels (train.call_kernel),
// train.call_kernel to its runtime call. Each lives
// in lib/Conversion/XToY/ConvertXToY.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_PASSES_TD
#define LOOM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertCollToLoomrtPass : Pass<"convert-coll-to-loomrt", "::mlir::ModuleOp"> {
  let summary = "Lowers coll ops to loomrt runtime calls, at the tensor level";
  let description = [{
    Every start becomes a call to `loomrt_coll_start` on the input's buffer
    and a freshly allocated output buffer; its wait becomes
    `loomrt_coll_wait` and a `bufferization.to_tensor` of the output.
    Both calls take buffer addresses as i64, so the ABI does not depend on
    the memref calling convention. The wait takes the input's buffer again.
    That keeps the input tensor live (and unwritten by in-place
    bufferisation) until the collective is done, since it is read
    asynchronously. `coll.release` is dropped (bufferisation's deallocation
    frees buffers after their last use). `coll.comm_world` is handle 0
    (`LOOMRT_COMM_WORLD`), a `coll.comm_group` the handle
    `loomrt_comm_group(parent, size, stride)` returns where it is made; each
    start passes its communicator's handle. `coll.comm_rank` becomes
    `loomrt_rank`, divided and reduced per group
    (`floor(r / stride) mod size`).

    ```mlir
    // before
    %f = coll.all_gather_start %s on %c gather_axis = 0 : ...
    %w = coll.wait %f : !coll.future<tensor<16xf32>>
    // after
    %in = bufferization.to_buffer %s read_only : tensor<4xf32> to memref<4xf32>
    %out = memref.alloc() : memref<16xf32>
    // kind, reduction, dtype, communicator, root/peer, in, count, out, count,
    // op id
    %h = call @loomrt_coll_start(%c0, %c0, %c0, %c0, %c0, %pin, %c4, %pout,
                                 %c16, %cm1)
    ...
    call @loomrt_coll_wait(%h, %pin2, %pout2) : (i64, i64, i64) -> ()
    %w = bufferization.to_tensor %out restrict writable : ...
    ```

    Only flat-layout collectives lower: gather and scatter axis 0 (the
    rank-major layout `zero-partition` and `coll-bucket` emit), element
    types f32, f64 and bf16, static shapes, a waited start, and the world
    communicator or a `coll.comm_group` of it. Anything else is a
    diagnostic.

    It is a dialect conversion, as upstream's `convert-async-to-llvm` is:
    a type converter (`!coll.comm<N>` is the i64 handle,
    `!coll.future<tensor<S x T>>` the start's i64 handle and its output
    `memref<S x T>`) and one pattern per op,
    `loom::coll::populateCollToLoomrtPatterns`, for other lowerings to
    reuse.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

def ConvertLinalgToBlasPass : Pass<"convert-linalg-to-blas", "::mlir::ModuleOp"> {
  let summary = "Replaces buffer contractions by BLAS GEMM calls";
  let description = [{
    On bufferised IR, every linalg op that computes
    `C(i, j) += A(i, k) * B(k, j)` becomes one CBLAS call. This covers
    `linalg.matmul` with any indexing maps, and the `linalg.generic`
    contractions autodiff emits for weight gradients (`dW = dYᵀ X`). A and
    B may each be transposed. The matrices must be f32 or f64 (CBLAS's
    `cblas_sgemm`/`dgemm`), or bf16 A and B with a bf16 or f32 C (the
    runtime's `loomrt_cblas_bgemm`/`sbgemm`, which accumulate in f32), with
    unit stride along their memref's last dimension, which must be one of
    the two matrix dimensions; the leading dimension is the other one's
    stride, so strided views (a head inside `[batch, seq, heads, dim]`)
    need no copy. With `library=cublas` every call is the runtime's
    (`loomrt_cublas_?gemm`, bf16 through `cublasGemmEx`).

    A contraction with batch dimensions (C's leading dimensions, e.g.
    attention's `Q Kᵀ` over batch and heads) becomes one strided batched
    call over the largest of them (heads), in a loop nest over the others
    (batch), at each operand's offset; A or B may skip a batch dimension
    (grouped-query attention's shared K and V: stride 0). A second
    reduction becomes an inner loop of calls that accumulate into C.
    Everything else (non-contiguous rows, dynamic shapes) is left to the
    loops.

    ```mlir
    // scores[b, h, i, j] += q[b, i, h, d] * k[b, j, h, d], 4 x 12 heads
    scf.for %b = %c0 to %c4 step %c1 {
      call @loomrt_cblas_sgemm_batched(%c101, %c111, %c112, %m, %n, %k,
          %alpha, %q, %ldq, %strideq, %k, %ldk, %stridek, %one,
          %scores, %lds, %strides, %c12)
    }
    ```

    ```mlir
    linalg.matmul ins(%x, %w : memref<32x64xf32>, memref<64x64xf32>)
                  outs(%y : memref<32x64xf32>)
    // becomes (C += A B, row-major, beta = 1)
    call @cblas_sgemm(%c101, %c111, %c111, %m, %n, %k, %one, %a, %lda,
                      %b, %ldb, %one, %c, %ldc)
    ```

    The caller links a CBLAS (loomc links OpenBLAS) and, for batched
    calls, `loomrt_cblas_?gemm_batched` (libloomrt_mpi: a loop of CBLAS
    calls). With `library=cublas` the calls go to
    `loomrt_cublas_sgemm`/`dgemm` and `loomrt_cublas_?gemm_batched`, which
    take the same arguments and run cuBLAS (`cublas?gemmStridedBatched`)
    on the CUDA backend's compute stream (the operands are then device
    memory).
  }];
  let options = [
    Option<"library", "library", "std::string", /*default=*/"\"cblas\"",
           "cblas (cblas_?gemm) or cublas (loomrt_cublas_?gemm)">,
    Option<"batch", "batch", "bool", /*default=*/"true",
           "call a strided batched GEMM over a batch dimension instead of "
           "looping over it">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
  let statistics = [
    Statistic<"numCalls", "gemm-calls", "Contractions that became a GEMM call">
  ];
}

def ConvertTrainKernelsToCallsPass
    : Pass<"convert-train-kernels-to-calls", "::mlir::ModuleOp"> {
  let summary = "Lowers bufferised train.call_kernel ops to runtime calls";
  let description = [{
    Each `train.call_kernel` on memrefs becomes a `func.call` of its callee
    (declared private if missing) with the address of each input and output
    buffer (`!llvm.ptr`, the aligned pointer plus the offset) and then the
    scalars. A buffer that is not contiguous row-major is replaced by a new
    contiguous one (`linalg.copy` in for inputs, out for outputs).

    ```mlir
    train.call_kernel @k(%n : i64) ins(%a : memref<8xf32>)
        outs(%b : memref<8xf32>)
    // becomes
    call @k(%pa, %pb, %n) : (!llvm.ptr, !llvm.ptr, i64) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def ConvertTrainToKernelsPass
    : Pass<"convert-train-to-kernels", "::mlir::ModuleOp"> {
  let summary = "Runs train ops as the runtime's kernels where they take them";
  let description = [{
    The train dialect's decompositions are target-free; this conversion is
    where a train op becomes a call of a runtime kernel
    (`train.call_kernel`), before `train-decompose` turns what is left into
    linalg. An op a kernel does not take stays, with a remark that says
    why, for `train-decompose`.

    With `loss-kernels`, `train.linear_cross_entropy` and its gradient (in
    f32, or f32-computed bf16/f16) keep their chunk loops and matmuls, but
    each chunk's log-sum-exp and loss, and its logits' gradient, become
    calls of the runtime's fused row kernels, which read each logit once per
    direction and apply the soft-cap on the fly:

    ```mlir
    %lse, %loss = train.call_kernel @loomrt_cross_entropy_f32(%rows, %vocab,
        %ignore, %smoothing, %z, %cap : i64, i64, i64, f64, f64, f64)
        ins(%logits, %labels : tensor<256x32000xf32>, tensor<256xi32>)
        outs(%e0, %e1 : tensor<256xf32>, tensor<256xf32>)
        -> tensor<256xf32>, tensor<256xf32>
    ```
    and `loomrt_cross_entropy_grad_f32` overwrites the recomputed logits
    with their gradient (`loomrt_cross_entropy_grad_bf16` writes it rounded
    to bf16 for a bf16 model's GEMMs). A forward over vocabulary blocks
    (`chunk_vocab`) keeps its linalg online log-sum-exp.

    With `embedding-kernel`, `train.embedding_grad` on i32 ids and an f32 or
    bf16 table becomes one call of the runtime's scatter-add, which sums in
    f32 in a fixed order on every backend (its second result is an f32
    scratch of one row a token) instead of a loop over the tokens:

    ```mlir
    %table, %scratch = train.call_kernel @loomrt_embedding_grad_bf16(
        %tokens, %rows, %width : i64, i64, i64)
        ins(%ids, %grad : tensor<8192xi32>, tensor<8192x768xbf16>)
        outs(%e0, %e1 : tensor<32000x768xbf16>, tensor<8192x768xf32>)
        -> tensor<32000x768xbf16>, tensor<8192x768xf32>
    ```

    With `cuda`, the calls are checked against the CUDA kernels' domain
    (`loom/Runtime/KernelDomains.h`).
  }];
  let options = [
    Option<"lossKernels", "loss-kernels", "bool", /*default=*/"true",
           "the fused loss's per-chunk row work as runtime kernels">,
    Option<"embeddingKernel", "embedding-kernel", "bool", /*default=*/"true",
           "the embedding gradient's scatter-add as a runtime kernel">,
    Option<"cuda", "cuda", "bool", /*default=*/"false",
           "check the kernels' calls against the CUDA kernels' domain">
  ];
  let dependentDialects = [
    "::loom::train::TrainDialect", "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect"
  ];
}

#endif // LOOM_CONVERSION_PASSES_TD
