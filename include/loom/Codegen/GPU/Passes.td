//===- Passes.td - GPU codegen -----------------------------*- tablegen -*-===//
//
// The CUDA target's codegen (and --emulate-gpu's): fewer, fuller kernels on
// tensors, every linalg op a GPU-mapped loop nest on buffers, and the
// outlined kernels named and merged.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_GPU_PASSES_TD
#define LOOM_CODEGEN_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def GpuFuseElementwisePass
    : Pass<"gpu-fuse-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Fuses elementwise producers into their consumers, not into GEMMs";
  let description = [{
    Upstream's elementwise producer-consumer fusion
    (`linalg::populateElementwiseOpsFusionPatterns`, with reshapes folded
    by expansion so that fusion crosses `tensor.expand_shape` and
    `tensor.collapse_shape`), controlled so that BLAS keeps its GEMMs: no
    producer is fused into a multiply-accumulate contraction that
    `convert-linalg-to-blas` takes, nor a contraction into its consumer,
    nor a reshape folded into one. (Fusing `codegen-widen-compute`'s rounding
    of an f32 operand into its bf16 GEMM would leave a contraction no BLAS
    call can run, and a loop in its place.) A producer is fused only into
    its one user, so nothing is computed twice, and not past a
    `coll.release` of a value it reads (ZeRO-3's gathered parameters). For
    the GPU kernels: each fusion is a kernel fewer and a tensor neither
    written nor read back. The fused op is located at both ops (a
    `FusedLoc`; upstream keeps the consumer's alone), so a profile times it
    under both op ids (`trainer-profile-probes`).
    Run on tensors, after `codegen-widen-compute` and before the memory plan.

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

def GpuSplitReductionPass
    : Pass<"gpu-split-reduction", "::mlir::func::FuncOp"> {
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
    `gpu-map-linalg` then gives the partials a thread each, neighbours
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

def GpuMapLinalgPass : Pass<"gpu-map-linalg", "::mlir::func::FuncOp"> {
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
    `loom.gpu_kernels` and `loom.gpu_block_reductions`, the counts (also
    the pass's statistics `kernels` and `block-reductions`).

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
    same way (`gpu-split-reduction`'s partials) takes its lanes along
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
    payload reads it and no fill was taken: a static count of the traffic);
    the statistics `vector-kernels` and `kernel-bytes` sum them.

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
  let statistics = [
    Statistic<"numKernels", "kernels", "Linalg ops mapped to a kernel each">,
    Statistic<"numBlockReductions", "block-reductions", "Reductions given a block per output">,
    Statistic<"numVectorKernels", "vector-kernels", "Kernels whose threads load and store vectors">,
    Statistic<"kernelBytes", "kernel-bytes", "Bytes the kernels operands span (reads and writes)">
  ];
}

def GpuNameKernelsPass : Pass<"gpu-name-kernels", "::mlir::ModuleOp"> {
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

def GpuMergeModulesPass : Pass<"gpu-merge-modules", "::mlir::ModuleOp"> {
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
    `gpu-name-kernels`, before `nvvm-attach-target`.

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
  let statistics = [
    Statistic<"numKernels", "kernels", "Kernels in the merged module">,
    Statistic<"numDuplicates", "duplicate-kernels", "Kernels dropped for an equal one">
  ];
}

#endif // LOOM_CODEGEN_GPU_PASSES_TD
