//===- TrainPasses.td - train passes -----------------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_TRAIN_TRAINPASSES_TD
#define LOOM_DIALECT_TRAIN_TRAINPASSES_TD

include "mlir/Pass/PassBase.td"

def TrainDecomposePass : Pass<"train-decompose"> {
  let summary = "Replaces train ops by their linalg decompositions";
  let description = [{
    Rewrites every op implementing `DecomposableOpInterface` into linalg,
    tensor, arith and math ops on tensors, for targets without a kernel and
    as the reference that kernels are checked against.

    ```mlir
    %y = train.rms_norm %x, %w eps = 1.0e-05 : tensor<4x64xf32>, tensor<64xf32>
    ```
    becomes a `linalg.generic` reduction of `x^2` over the last dimension
    followed by an elementwise `linalg.generic` computing
    `x * rsqrt(sum / 64 + eps) * w`.

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
    to bf16 for a bf16 model's GEMMs). The forward over vocabulary blocks
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
  }];
  let options = [
    Option<"lossKernels", "loss-kernels", "bool", /*default=*/"false",
           "the fused loss's per-chunk row work as runtime kernels">,
    Option<"embeddingKernel", "embedding-kernel", "bool", /*default=*/"false",
           "the embedding gradient's scatter-add as a runtime kernel">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

def TrainAutodiffPass : Pass<"train-autodiff", "::mlir::ModuleOp"> {
  let summary = "Turns a loss function into a training step returning gradients";
  let description = [{
    Reverse-mode differentiation of every function with a `train.loss`
    result. The function keeps its arguments and returns the loss followed by
    one gradient per `train.param` argument, in argument order, each tagged
    `train.grad = "<param name>"`:

    ```mlir
    func.func @f(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<4xf32> {train.input})
        -> (tensor<f32> {train.loss})
    ```
    becomes
    ```mlir
    func.func @f(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<4xf32> {train.input})
        -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"})
    ```

    Named linalg ops are differentiated through their generic form; the body
    of a `linalg.generic` is differentiated scalar by scalar. The backward
    reads only the forward values the derivative needs (see docs/Autodiff.md).
  }];
  let options = [
    Option<"cleanup", "cleanup", "bool", /*default=*/"true",
           "canonicalise and CSE afterwards, which also drops the forward "
           "values the backward does not read">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

def TrainOptimizerPass : Pass<"train-optimizer", "::mlir::ModuleOp"> {
  let summary = "Appends the optimizer update to a training step";
  let description = [{
    On every function produced by `train-autodiff`, inserts the optimizer
    state after the parameter arguments and replaces the gradient results by
    the updated parameters and state: the step takes
    `(params..., state..., inputs...)` and returns
    `(loss, other results..., new params..., new state...)`. AdamW keeps two
    moments per parameter (`train.state = "<param>.m"`, `"<param>.v"`, of the
    parameter's type) and a step counter (`train.state = "step"`,
    `tensor<f32>`, 0 before the first step); SGD keeps none. The updates are
    PyTorch's `AdamW` and `SGD` (with L2 `weight_decay`):

    ```
      AdamW, for each parameter p with gradient g:
        t' = t + 1
        m' = b1 m + (1 - b1) g              v' = b2 v + (1 - b2) g^2
        p' = p - lr (m' / (1 - b1^t') / (sqrt(v' / (1 - b2^t')) + eps) + wd p)
      SGD:
        p' = p - lr (g + wd p)
    ```
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"adamw\"",
           "the optimizer: adamw or sgd">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "AdamW first-moment decay">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999",
           "AdamW second-moment decay">,
    Option<"eps", "eps", "double", /*default=*/"1e-8",
           "AdamW denominator epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "decoupled weight decay (AdamW) or L2 decay (SGD)">,
    Option<"lrInput", "lr-input", "bool", /*default=*/"false",
           "take the learning rate as a 0-d f32 argument tagged "
           "train.input = \"lr\" (the last one) instead of the constant "
           "`lr`, so a trainer can set or schedule it at run time">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
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
}

def TrainFuseLinearCrossEntropyPass
    : Pass<"train-fuse-linear-cross-entropy", "::mlir::func::FuncOp"> {
  let summary = "Fuses the output projection into the cross-entropy";
  let description = [{
    Finds `train.cross_entropy` whose logits are a `linalg.matmul` of
    `[tokens, hidden]` hidden states with a `[vocab, hidden]` weight
    (`logits = hidden @ weightᵀ`, accumulated into zeros or into a `[vocab]`
    bias broadcast over the tokens) and used by nothing else, and replaces the pair by `train.linear_cross_entropy`,
    so that no `[tokens, vocab]` logits exist. In a training step (after
    `train-autodiff`) it also replaces the backward's chain: the
    `train.cross_entropy_grad` of those logits and the contractions of its
    result (`dhidden = dlogits @ weight`, `dweight = dlogitsᵀ @ hidden`, and
    the bias's `sum over tokens`) become one
    `train.linear_cross_entropy_grad`, which reads the forward's
    log-sum-exp; a contraction that accumulated into an earlier gradient
    (a tied embedding) becomes an add.

    ```mlir
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<128x256xf32>) -> tensor<128x256xf32>
    %logits = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                             affine_map<(m, n, k) -> (n, k)>,
                                             affine_map<(m, n, k) -> (m, n)>]
        ins(%h, %w : tensor<128x64xf32>, tensor<256x64xf32>)
        outs(%z : tensor<128x256xf32>) -> tensor<128x256xf32>
    %loss = train.cross_entropy %logits, %labels ignore_index = -100
        reduction = <mean> label_smoothing = 0.0 z_loss = 0.0
        : tensor<128x256xf32>, tensor<128xi32> -> tensor<f32>
    // becomes
    %loss, %lse = train.linear_cross_entropy %h, %w, %labels
        ignore_index = -100 reduction = <mean> label_smoothing = 0.0
        z_loss = 0.0 softcap = 0.0 chunk_tokens = 1024
        : tensor<128x64xf32>, tensor<256x64xf32>, tensor<128xi32>
        -> tensor<f32>, tensor<128xf32>
    ```

    A step whose tokens fit in one chunk is left alone: one chunk would
    hold all the logits, and the backward follows the loss at once, so
    fusing would save nothing. With `remarks`, every cross-entropy left
    unfused gets a remark with the reason (logits not a projection, used
    elsewhere, a weight not in `[vocab, hidden]` layout, a backward that is
    not the expected chain, one chunk).
  }];
  let options = [
    Option<"chunkTokens", "chunk-tokens", "int64_t", /*default=*/"1024",
           "Tokens per chunk of the fused op's loop (each holds a "
           "[chunk, vocab] block of logits)">,
    Option<"chunkVocab", "chunk-vocab", "int64_t", /*default=*/"0",
           "Vocabulary entries per block inside a chunk (an online "
           "log-sum-exp; 0: the whole vocabulary)">,
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Say why each cross-entropy left alone was not fused">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::loom::train::TrainDialect"];
}

def LoomVectorizePass : Pass<"loom-vectorize", "::mlir::func::FuncOp"> {
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
    `convert-linalg-to-loops`. The function gets
    `loom.vectorized_ops` and `loom.scalar_ops`: how many linalg ops became
    vector loops and how many were left.

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
}

def LoomLinalgToGpuPass : Pass<"loom-linalg-to-gpu", "::mlir::func::FuncOp"> {
  let summary = "Maps every buffer linalg op to a GPU-mapped loop nest";
  let description = [{
    The CUDA target's step is host code that launches kernels: every linalg
    op left after `convert-linalg-to-blas{library=cublas}` becomes one
    kernel. Parallel dimensions go first (the order of the reduction
    dimensions is kept, so each result is summed in the CPU's order); the
    parallel iteration space is linearised, with the innermost parallel
    dimension fastest so that neighbouring threads touch neighbouring
    elements, and split into blocks of `threads` threads. Each thread runs
    the op's reductions for its element. An op with no parallel dimension
    runs on one thread.

    A single reduction of at least `block-reduce-min` elements along the
    innermost, unit-stride dimension of every input that reads it, with an
    add, mul, max or min combiner (softmax's max and sum, RMSNorm's sum of
    squares, the loss's log-sum-exp), gets a block per output element
    instead. Its threads stride along the row (coalesced), each folding a
    partial from the combiner's neutral element, and the block combines the
    partials: an `scf.reduce`, which `convert-parallel-loops-to-gpu` turns
    into a `gpu.all_reduce` (warp shuffles and one shared-memory step).
    The sum's order then differs from the CPU's. The function gets
    `loom.gpu_kernels` and `loom.gpu_block_reductions`, the counts.

    ```mlir
    // sum over 512 columns of each of 8 rows
    scf.parallel (%row) = (%c0) to (%c8) step (%c1) {
      %s = scf.parallel (%t) = (%c0) to (%c256) step (%c1) init (%zero) -> f32 {
        %p = scf.for %k = %t to %c512 step %c256 iter_args(%a = %zero) -> (f32) {...}
        scf.reduce(%p : f32) { ^bb0(%l: f32, %r: f32): ... arith.addf ... }
      } {mapping = [#gpu.loop_dim_map<processor = thread_x, ...>]}
      // out[row] = out[row] + %s
    } {mapping = [#gpu.loop_dim_map<processor = block_x, ...>]}
    ```

    ```mlir
    linalg.generic {iterator_types = ["parallel", "parallel"]}
        ins(%x : memref<4x96xf32>) outs(%y : memref<4x96xf32>) {...}
    // becomes
    scf.parallel (%b) = (%c0) to (%c2) step (%c1) {
      scf.parallel (%t) = (%c0) to (%c256) step (%c1) {
        %i = affine.apply (b, t) -> (b * 256 + t)
        scf.if %i < 384 {
          %r:2 = affine.delinearize_index %i into (4, 96)
          ... the body on %r#0, %r#1 ...
        }
      } {mapping = [#gpu.loop_dim_map<processor = thread_x, ...>]}
    } {mapping = [#gpu.loop_dim_map<processor = block_x, ...>]}
    ```

    `convert-parallel-loops-to-gpu` turns the nest into a `gpu.launch`.
    Host buffers become device buffers: `memref.alloc`/`dealloc` (the arena)
    become `gpu.alloc`/`gpu.dealloc`, and `memref.copy` becomes a
    `linalg.copy` kernel. A host loop that reads memory (the embedding
    gradient's scatter-add reads each token id) runs whole inside the kernel
    of the one elementwise op it repeats, each thread walking the loop for
    its element, so repeated ids add up in the CPU's order. Anything else
    that would touch memory on the host is an error naming the op.

    An elementwise op (no reduction, an arith/math body) whose every
    operand reads the innermost dimension with unit stride, or not at all,
    gets `vector-bytes` of its widest operand per thread (4 f32 or 8 bf16
    elements at 16): each thread loads its lanes as one `vector.load` with
    the alignment the static offsets and strides prove (a broadcast
    operand, or a scalar one such as a fill's value, as one scalar), runs
    the body once per lane (`linalg.index` giving each lane its own
    index), and stores one `vector.store`, so the loads are `ld.global.v4`
    in PTX. The innermost
    size must be a multiple of the lanes, and every offset and outer stride
    of the lanes; otherwise the op keeps a thread per element. A block
    reduction along rows read with unit stride loads its rows the same way:
    each thread takes the lanes at `lanes x thread`, then strides by
    `lanes x block`, folding them in order. A reduction kept as a thread
    per output whose operands read its innermost parallel dimension the
    same way (`train-split-reduction`'s partials) takes its lanes along
    that dimension: the output's lanes are loaded before the reduction
    loops and carried through them, each row's inputs are one vector load
    each, every lane sums in the CPU's order, and the innermost reduction
    loop is unrolled by up to 8 (the rows' loads in flight). Every
    reduction takes over a `linalg.fill` of its output right before it
    (nothing with memory effects between): the fill is erased and the lanes,
    the block's first thread, or each output's thread start from its value.
    The function gets `loom.gpu_vector_kernels`, the count of all three
    kinds, and `loom.gpu_kernel_bytes`, the bytes the kernels' operands span
    (each input read, each output written, and read as well where the
    payload reads it and no fill was taken: a static count of the traffic).

    ```mlir
    // y = exp(x), memref<4x96xf32>: 96 threads of 4 lanes
    %r:2 = affine.delinearize_index %i into (4, 24)
    %c = arith.muli %r#1, %c4
    %v = vector.load %x[%r#0, %c] {alignment = 16 : i64} : memref<4x96xf32>, vector<4xf32>
    %e0 = math.exp (vector.extract %v[0]) ... %e3 = math.exp (vector.extract %v[3])
    vector.store (vector.from_elements %e0, %e1, %e2, %e3), %y[%r#0, %c] {alignment = 16 : i64}
    ```

    The mapped nests are still host-runnable `scf.parallel` loops: with
    `device-buffers=false`, `loomc --emulate-gpu` runs them on the CPU, which
    checks the mapping (indices, interchanges, guards) against the CPU
    trainer without a GPU.
  }];
  let options = [
    Option<"threads", "threads", "int64_t", /*default=*/"256",
           "threads per block">,
    Option<"blockReduceMin", "block-reduce-min", "int64_t", /*default=*/"128",
           "a reduction along the rows' contiguous dimension this long or "
           "longer gets a block per row (0: never)">,
    Option<"deviceBuffers", "device-buffers", "bool", /*default=*/"true",
           "move allocations to the device (false: keep memref.alloc, so "
           "that the mapped nests can run on the host as a check)">,
    Option<"vectorBytes", "vector-bytes", "int64_t", /*default=*/"16",
           "an elementwise op's threads each take this many bytes of its "
           "widest operand, loaded and stored as aligned vectors (0 or the "
           "element size: one element per thread)">
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def LoomUpdateInPlacePass
    : Pass<"loom-update-in-place", "::mlir::func::FuncOp"> {
  let summary = "Writes a step's parameter and state updates into their "
                "arguments' buffers";
  let description = [{
    A training step takes every parameter and optimizer state tensor and
    returns its update, so the caller would hold two copies of each. This
    pass marks the results that may be written into the buffer of the
    argument they update (the same `train.param` or `train.state` name):
    the result's op is elementwise (all loops parallel), starts a new
    buffer (its init is a `tensor.empty`), reads the argument only at the
    indices it writes, and comes after every other read of the argument in
    the step's order, counting reads through views and a collective's
    asynchronous read up to its `coll.wait`. The function gets
    `loom.tied_results`, one entry per result: the argument's index, or -1.

    The memory timeline (with caller-owned results) then charges nothing
    for a tied result, `loom-memory-plan` leaves it out of the arena, and
    loomc's entry point materialises it into the argument's buffer, which
    bufferisation writes in place; the trainer does not allocate the
    result. Run after every reordering, right before `loom-memory-plan`.

    ```mlir
    func.func @step(%w: tensor<64xf32> {train.param = "w"}, ...)
        -> (tensor<64xf32> {train.param = "w"}, ...)
    // gets
    attributes {loom.tied_results = array<i64: 0, ...>}
    ```
  }];
}

def LoomMemoryPlanPass : Pass<"loom-memory-plan", "::mlir::func::FuncOp"> {
  let summary = "Places a step's tensors in one arena, from the memory timeline";
  let description = [{
    The static memory plan, made on tensors before bufferisation so that the
    executable uses exactly the memory the memory timeline (MemoryTimeline,
    the analysis the scheduler bounds) predicts. The pass computes the
    timeline of the function's single block, packs every buffer the timeline
    allocates into one arena (offsets from the buffers' lifetimes; see
    ArenaPacker.h), and pins each buffer to its offset (below). A loop body (the
    fused loss's chunks) is planned the same way, recursively, into a
    region of the arena that is one buffer of the enclosing block, live
    while the loop runs; the timeline charges the body's peak there.
    Pinning:

    * an op whose result starts a buffer writes into its slot: its
      tensor.empty init (or an init it never reads) is replaced by the slot,
      otherwise the init is first copied into the slot (`linalg.copy`);
    * a collective's result buffer is recorded on its start op as
      `loom.arena_offset`, which `convert-coll-to-loomrt` turns into a view;
    * a `tensor.empty` whose slice an op writes and inserts back at the same
      place (what `eliminate-empty-tensors` makes of a tensor joined from
      parts, RoPE's halves) is itself replaced by the slot: its buffer
      begins at that op, which writes into the slice in place. An empty
      tensor that several joins share (CSE merges them) is first cloned for
      each, as a shared fill is for each user.

    A slot is `bufferization.to_tensor restrict writable` of a `memref.view`
    into the arena, so one-shot bufferisation writes in place and allocates
    nothing else. Arguments (and, with `caller-owned-results`, results written
    straight into the caller's buffers) stay outside the arena.

    ```mlir
    %e = tensor.empty() : tensor<64xf32>          %arena = memref.alloc() {alignment = 64 : i64, loom.arena} : memref<256xi8>
    %r = linalg.generic ... outs(%e ...)          %v = memref.view %arena[%c0][] : memref<256xi8> to memref<64xf32>
                                                  %s = bufferization.to_tensor %v restrict writable ...
                                                  %r = linalg.generic ... outs(%s ...)
    ```

    The function gets `loom.timeline_peak_bytes` (the timeline's peak, with
    arguments and caller-owned results), `loom.arena_bytes` (the arena) and
    `loom.arena_bound_bytes` (the most arena bytes live at once, which no
    packing can beat). The plan's peak (arena + arguments + results) equals
    the timeline's peak exactly when the arena reaches that bound. Buffers
    made by ops the pass cannot pin are counted in `loom.unplanned_buffers`
    and left to bufferisation (and `loom-pack-buffers`).
  }];
  let options = [
    Option<"callerOwnedResults", "caller-owned-results", "bool",
           /*default=*/"false",
           "results are buffers the caller owns for the whole call">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect"];
}

def LoomPackBuffersPass : Pass<"loom-pack-buffers", "::mlir::func::FuncOp"> {
  let summary = "Places what bufferisation allocated in one arena";
  let description = [{
    The fallback of the static memory plan, on bufferised IR: every
    `memref.alloc` at the top of the function body (static shape, identity
    layout, not the planned arena) whose buffer does not escape becomes a
    `memref.view` into one more arena, allocated once at entry and freed
    before each return. "Escapes" means returned, passed to a call, stored,
    or deallocated inside a region. After `loom-memory-plan` nothing is left
    for it unless bufferisation copied something the timeline did not
    predict.

    A buffer's lifetime runs from its allocation to the last top-level op
    that uses it, any view of it, or its address (a runtime call reads it
    through the address). Its `memref.dealloc`s are dropped. Offsets come
    from ArenaPacker. The function gets `loom.packed_bytes` and
    `loom.packed_bound_bytes` (the most bytes live at once).

    ```mlir
    %a = memref.alloc() : memref<64xf32>        %arena = memref.alloc() : memref<512xi8>
    ...                                          %a = memref.view %arena[%c0][] : ... to memref<64xf32>
    memref.dealloc %a : memref<64xf32>          %b = memref.view %arena[%c256][] : ...
    %b = memref.alloc() : memref<64xf32>        ...
                                                 memref.dealloc %arena : memref<512xi8>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def LoomNameGpuKernelsPass : Pass<"loom-name-gpu-kernels", "::mlir::ModuleOp"> {
  let summary = "Names each outlined kernel after its gpu.module";
  let description = [{
    `gpu-kernel-outlining` names every kernel of a function `<func>_kernel`
    and uniques only the modules, so a step's few hundred kernels all share
    one entry name and profilers (Nsight Compute, the CUDA trace) cannot tell
    them apart. This pass renames the kernel of each `gpu.module` that holds
    one `gpu.func` kernel to the module's own (unique) name and updates every
    `gpu.launch_func` that calls it.

    ```mlir
    gpu.module @step_kernel_3 {                 gpu.module @step_kernel_3 {
      gpu.func @step_kernel(...) kernel           gpu.func @step_kernel_3(...) kernel
    }                                           }
    gpu.launch_func @step_kernel_3::@step_kernel  gpu.launch_func @step_kernel_3::@step_kernel_3
    ```
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def LoomMergeGpuModulesPass : Pass<"loom-merge-gpu-modules", "::mlir::ModuleOp"> {
  let summary = "Merges the kernel modules into one, keeping identical kernels once";
  let description = [{
    After `gpu-kernel-outlining` every kernel has its own `gpu.module`, and a
    model's layers repeat the same kernels (they differ only in the buffers
    they are launched on). Each module is compiled on its own (a PTX JIT at
    the first launch, or a ptxas run for a cubin) and loaded on its own.
    This pass moves the kernels of every module that holds kernels only (no
    target attached yet) into one `gpu.module`, keeps one of each set of
    kernels whose text is equal up to their names, and points every
    `gpu.launch_func` at the kept kernel. Run it after
    `loom-name-gpu-kernels`, before `nvvm-attach-target`.

    ```mlir
    gpu.module @k_0 {                        gpu.module @loom_kernels {
      gpu.func @k_0(%a: memref<4xf32>)         gpu.func @k_0(%a: memref<4xf32>)
          kernel { A }                             kernel { A }
    }                                          gpu.func @k_2(%a: memref<8xf32>)
    gpu.module @k_1 {                              kernel { B }
      gpu.func @k_1(%a: memref<4xf32>)       }
          kernel { A }                       gpu.launch_func @loom_kernels::@k_0
    }                                        gpu.launch_func @loom_kernels::@k_0
    gpu.module @k_2 { ... B ... }            gpu.launch_func @loom_kernels::@k_2
    gpu.launch_func @k_0::@k_0
    gpu.launch_func @k_1::@k_1
    gpu.launch_func @k_2::@k_2
    ```
  }];
  let options = [
    Option<"moduleName", "module-name", "std::string",
           /*default=*/"\"loom_kernels\"",
           "the merged module's name (made unique if taken)">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def TrainFuseAttentionPass
    : Pass<"train-fuse-attention", "::mlir::func::FuncOp"> {
  let summary = "Runs attention and its gradient as fused runtime kernels";
  let description = [{
    Replaces each f32, bf16 or f16 `train.attention` with equal query and
    key lengths by
    a `train.call_kernel` of `loomrt_attention_f32`, which returns the
    output and each query row's log-sum-exp (`[batch, heads, seq]`), and
    each `train.attention_grad` after it in the same block on the same
    query, key and value (and `causal`, `scale`) by a call of
    `loomrt_attention_grad_f32`, which takes that output and log-sum-exp
    and a `[batch, heads, seq]` workspace. The runtime's kernels tile the
    sequence (online softmax, FlashAttention-2's backward) and never hold
    the `seq x seq` scores the decomposition does. A bf16 attention whose
    head dim is a multiple of 8 calls `loomrt_attention_bf16` and
    `loomrt_attention_grad_bf16` instead (tensor cores on the CUDA target);
    any other bf16 or f16 attention's operands are widened (`arith.extf`
    generics) for each f32 call and its results rounded back. The
    log-sum-exp is f32 either way.
    Run after `train-autodiff`, before `train-decompose`.

    ```mlir
    %o = train.attention %q, %k, %v causal scale = 0.25
        : tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>
    // becomes
    %o, %lse = train.call_kernel @loomrt_attention_f32(%c4, %c32, %c8, %c2,
        %c16, %true, %scale : i64, i64, i64, i64, i64, i32, f32)
        ins(%q, %k, %v : ...) outs(%e0, %e1 : ...) -> ...
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def TrainSplitReductionPass
    : Pass<"train-split-reduction", "::mlir::func::FuncOp"> {
  let summary = "Splits long column reductions into partials and a combine";
  let description = [{
    For the GPU: a reduction of many rows into few outputs (a norm's weight
    gradient sums 8,192 tokens into 768), whose inputs are read along the
    outputs' dimension, becomes two generics. The first folds `rows`
    rows into each of `S` partials: the longest reduction dimension, of
    size `N`, is split into `S x (N / S)` by a `tensor.expand_shape` of
    each input that reads it, and `S` becomes the outer, parallel dimension
    of a tensor of partials filled with the combiner's neutral element. The
    second folds the `S` partials into the original output, in order.
    `loom-linalg-to-gpu` then gives the partials a thread each, neighbours
    reading neighbouring columns of the same rows, instead of a block per
    output striding over rows. Every sum keeps a fixed order.

    It applies to a `linalg.generic` on tensors with one init, an add, mul,
    max or min combiner, projected-permutation maps, static shapes, no
    `linalg.index`, at most `max-outputs` outputs and at least `min-rows`
    reduced elements each, where every input that reads both a reduction
    and a parallel dimension has a parallel dimension innermost (a row
    reduction is already coalesced as a block per row) and which is not a
    multiply-accumulate contraction (BLAS takes those). `S` is the most
    partials for which each still folds at least `rows` elements (times the
    other reduction dimensions), `N / S` a divisor of `N`. Run on tensors,
    before the memory plan, so that the partials are planned.

    ```mlir
    // dw[c] = sum over (b, t) of dy * x * rstd
    %dw = linalg.generic {iterator_types = ["reduction", "reduction", "parallel"]}
        ins(%dy, %x, %rstd : tensor<4x2048x768xf32>, tensor<4x2048x768xf32>,
            tensor<4x2048xf32>) outs(%zero : tensor<768xf32>) {...}
    // becomes, with rows=32 (t split into 256 x 8):
    %dy2 = tensor.expand_shape %dy [[0], [1, 2], [3]] : ... into tensor<4x256x8x768xf32>
    ...
    %p = linalg.generic {iterator_types = ["reduction", "parallel", "reduction", "parallel"]}
        ins(%dy2, %x2, %rstd2 : ...) outs(%neutral : tensor<256x768xf32>) {...}
    %dw = linalg.generic {iterator_types = ["reduction", "parallel"]}
        ins(%p : tensor<256x768xf32>) outs(%zero : tensor<768xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %s = arith.addf %acc, %in : f32
      linalg.yield %s : f32
    }
    ```
  }];
  let options = [
    Option<"rows", "rows", "int64_t", /*default=*/"32",
           "elements each partial folds, at least (0: never split)">,
    Option<"maxOutputs", "max-outputs", "int64_t", /*default=*/"32768",
           "split only reductions into at most this many outputs">,
    Option<"minRows", "min-rows", "int64_t", /*default=*/"1024",
           "split only reductions of at least this many elements an output">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def TrainFoldInitFillsPass
    : Pass<"train-fold-init-fills", "::mlir::func::FuncOp"> {
  let summary = "Elementwise ops read a fill's value instead of its tensor";
  let description = [{
    Autodiff starts an adjoint at zero and adds each contribution into it,
    so an elementwise adjoint reads a zero-filled init: on the GPU that is
    a fill kernel writing the whole tensor, and the elementwise kernel
    reading it back. In a linalg op whose loops are all parallel and whose
    init is read through a permutation map, each init element is read once,
    where it is written, and holds the fill's value: the payload uses that
    value instead, and the init becomes a `tensor.empty`. An init the
    payload never reads (a named elementwise op, a fill into a fill) loses
    its fill too. The arithmetic is unchanged (`0 + x` is still computed),
    so the results keep their bits. Only fills of a `tensor.empty` are
    folded; a reduction keeps its init. Run on tensors, before the memory
    plan.

    ```mlir
    %z = linalg.fill ins(%c0 : bf16) outs(%e : tensor<8192x768xbf16>)
    %g = linalg.generic {iterator_types = ["parallel", "parallel"]}
        ins(%dy, %x : ...) outs(%z : tensor<8192x768xbf16>) {
    ^bb0(%a: bf16, %b: bf16, %acc: bf16):
      ...
      %s = arith.addf %acc, %p : bf16
      linalg.yield %s : bf16
    }
    // becomes
    %e2 = tensor.empty() : tensor<8192x768xbf16>
    %g = linalg.generic {iterator_types = ["parallel", "parallel"]}
        ins(%dy, %x : ...) outs(%e2 : tensor<8192x768xbf16>) {
    ^bb0(%a: bf16, %b: bf16, %acc: bf16):
      ...
      %s = arith.addf %c0, %p : bf16
      linalg.yield %s : bf16
    }
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def TrainFuseElementwisePass
    : Pass<"train-fuse-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Fuses elementwise producers into their consumers, not into GEMMs";
  let description = [{
    Upstream's elementwise producer-consumer fusion
    (`linalg::populateElementwiseOpsFusionPatterns`, with reshapes folded
    by expansion so that fusion crosses `tensor.expand_shape` and
    `tensor.collapse_shape`), controlled so that BLAS keeps its GEMMs: no
    producer is fused into a multiply-accumulate contraction that
    `convert-linalg-to-blas` takes, nor a contraction into its consumer,
    nor a reshape folded into one. (Fusing `train-widen-compute`'s rounding
    of an f32 operand into its bf16 GEMM would leave a contraction no BLAS
    call can run, and a loop in its place.) A producer is fused only into
    its one user, so nothing is computed twice, and not past a
    `coll.release` of a value it reads (ZeRO-3's gathered parameters). For the GPU kernels: each
    fusion is a kernel fewer and a tensor neither written nor read back.
    Run on tensors, after `train-widen-compute` and before the memory plan.

    ```mlir
    %r = linalg.generic {iterator_types = ["parallel", "parallel"]}
        ins(%g : tensor<128x256xf32>) outs(%e : tensor<128x256xbf16>) {
      arith.truncf }
    %dw = linalg.generic {iterator_types = ["reduction", "parallel", "parallel"]}
        ins(%r, %x : tensor<128x256xbf16>, tensor<128x64xbf16>)
        outs(%zero : tensor<256x64xbf16>) { out + a * b }
    // stays two ops: %dw is a GEMM for BLAS
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::affine::AffineDialect"];
}

def TrainShareIndexGenericsPass
    : Pass<"train-share-index-generics", "::mlir::func::FuncOp"> {
  let summary = "Computes equal tables of indices once";
  let description = [{
    A `linalg.generic` with no inputs, whose init is a `tensor.empty`,
    computes from its indices alone: RoPE's cos and sin tables, which
    `train.rope`'s decomposition builds for every rope op and again in the
    backward (50 at ~125M). Equivalent ones in the same block (the same
    type, attributes and body) are computed once, at the first; the later
    ones use its result. Each is a GPU kernel less; the table lives from
    the first use to the last, so only tables of at most `max-bytes` are
    shared. Run on tensors, after `train-decompose`.

    ```mlir
    %c1 = linalg.generic {iterator_types = ["parallel", "parallel"]}
        outs(%e1 : tensor<2048x32xbf16>) { linalg.index ... math.cos ... }
    ...
    %c2 = linalg.generic {iterator_types = ["parallel", "parallel"]}
        outs(%e2 : tensor<2048x32xbf16>) { the same body }
    // %c2's uses read %c1
    ```
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"1048576",
           "share only tables of at most this many bytes">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def TrainWidenComputePass
    : Pass<"train-widen-compute", "::mlir::func::FuncOp"> {
  let summary = "Computes bf16 and f16 linalg generics in f32";
  let description = [{
    Mixed precision as the compiler's job: tensors stay in bf16 (or f16),
    arithmetic does not. Each `linalg.generic` that reads or writes a
    16-bit float computes its body in f32: its 16-bit arguments are extended
    at the top, every op computes in f32, and what it yields is rounded once.
    A reduction accumulates into an f32 tensor (a fill is widened in place,
    any other init is extended) and is rounded once after the last element;
    a later generic that reads the rounded result reads the f32 one instead,
    so a norm's sum of squares or softmax's row sum is never rounded on its
    way to the division. Contractions whose body is a multiply-accumulate
    are left for `convert-linalg-to-blas`, whose bf16 GEMMs accumulate in
    f32. A contraction of an f32 and a bf16 operand into a bf16 result,
    `out + truncf(x * extf(y))` (autodiff's adjoints of the f32 logits'
    matmul), has its f32 operand rounded to bf16 first and becomes such a
    multiply-accumulate, as PyTorch rounds the logits' gradient before its
    bf16 matmuls. Run after `train-decompose`, on tensors.

    ```mlir
    %ss = linalg.generic {.. ["parallel", "reduction"]}
        ins(%x : tensor<8x64xbf16>) outs(%zero : tensor<8xbf16>) {
    ^bb0(%a: bf16, %acc: bf16):
      %sq = arith.mulf %a, %a : bf16
      %s = arith.addf %acc, %sq : bf16
      linalg.yield %s : bf16
    } -> tensor<8xbf16>
    // becomes
    %f = linalg.fill ins(%c0_f32 : f32) outs(%e : tensor<8xf32>)
    %ss32 = linalg.generic {..} ins(%x : tensor<8x64xbf16>)
        outs(%f : tensor<8xf32>) {
    ^bb0(%a: bf16, %acc: f32):
      %a32 = arith.extf %a : bf16 to f32
      %sq = arith.mulf %a32, %a32 : f32
      %s = arith.addf %acc, %sq : f32
      linalg.yield %s : f32
    } -> tensor<8xf32>
    %ss = linalg.generic {..} ins(%ss32 : tensor<8xf32>)
        outs(%e2 : tensor<8xbf16>) { arith.truncf }  // only if still used
    ```

    A generic whose body holds an op outside `arith` and `math` (other
    than `linalg.index`), or a bit cast of a 16-bit float, is left as it
    is.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
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

#endif // LOOM_DIALECT_TRAIN_TRAINPASSES_TD
