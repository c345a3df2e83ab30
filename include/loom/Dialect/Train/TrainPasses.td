//===- TrainPasses.td - passes on train ops ----------------*- tablegen -*-===//

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

    Target-free: where an op runs as a runtime kernel instead (the fused
    loss's rows, the embedding gradient), `convert-train-to-kernels` has
    made that choice before.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

def TrainFootprintPass : Pass<"train-footprint", "::mlir::ModuleOp"> {
  let summary = "Records the memory each train op's lowering will allocate";
  let description = [{
    A train op is one op to the memory timeline, but its lowering allocates
    temporaries (attention's scores, a norm's statistics) and may write a
    result into an operand's buffer. So that train-remat and the scheduler
    bound the memory the plan will allocate, this pass lowers a copy of
    each distinct train op (by name, attributes and types) on its own with
    `lowering`, the passes the memory-plan phase lowers train ops with
    (default: `train-decompose`), then `eliminate-empty-tensors`, and
    measures the result with the memory plan's timeline (64-byte aligned
    buffers). It records on the op:

    * `scratch`: the most bytes the lowering holds at once beyond its
      operands and results;
    * `in_place`: per result, the operand whose buffer the lowering's last
      write of it goes into (when nothing after it reads that operand), or
      -1;
    * `tables`: the tables of indices the lowering computes (RoPE's
      angles), each as a key and its bytes; `codegen-share-index-generics`
      computes equal tables once for the whole step, so they are not
      scratch.

    The memory timeline charges the scratch while the op runs, writes such
    a result into its operand when the operand's value dies at the op, as
    it does for a linalg op's init, and (with the plan's rules) keeps each
    table from the first op that needs it to the last.

    ```mlir
    %y = train.rms_norm %x, %w eps = 1.0e-05 : tensor<4x64xf32>, tensor<64xf32>
    // becomes
    %y = train.rms_norm %x, %w eps = 1.0e-05 {train.footprint =
        #train.footprint<scratch = 64, in_place = [-1]>}
        : tensor<4x64xf32>, tensor<64xf32>
    ```

    A lowering that fails on a copy is an error naming the op. Remarks the
    lowering makes on the copies are dropped (the memory-plan phase makes
    them on the step).
  }];
  let options = [
    Option<"lowering", "lowering", "std::string", /*default=*/"\"\"",
           "the pipeline on a module that lowers train ops as the memory-plan "
           "phase does, e.g. "
           "builtin.module(train-fuse-attention,train-decompose) (empty: "
           "train-decompose)">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::bufferization::BufferizationDialect"];
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

    With `cuda`, each attention is checked against what the CUDA kernels
    take (`loom/Runtime/KernelDomains.h`: head dims up to 128, multiples of
    4 in f32 and of 8 in bf16; batch x heads at most 65535). Attention
    outside it is left to `train-decompose`, and every fallback (to the
    decomposition, or a bf16 attention widened to f32) is a remark:

    ```mlir
    // remark: train-fuse-attention: head dim 132 is outside the CUDA
    // kernels' (at most 128, a multiple of 4 in f32); left to train-decompose
    %o = train.attention %q, %k, %v causal scale = 0.087
        : tensor<1x16x2x132xf32>, tensor<1x16x2x132xf32>
    ```

    ```mlir
    %o = train.attention %q, %k, %v causal scale = 0.25
        : tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>
    // becomes
    %o, %lse = train.call_kernel @loomrt_attention_f32(%c4, %c32, %c8, %c2,
        %c16, %true, %scale : i64, i64, i64, i64, i64, i32, f32)
        ins(%q, %k, %v : ...) outs(%e0, %e1 : ...) -> ...
    ```
  }];
  let options = [
    Option<"cuda", "cuda", "bool", /*default=*/"false",
           "check each attention against the CUDA kernels' domain">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def TrainRecordIdBoundsPass
    : Pass<"train-record-id-bounds", "::mlir::func::FuncOp"> {
  let summary = "Tags each input of ids with the vocabulary that reads it";
  let description = [{
    The ids of a `train.embedding` must lie below its table's rows, and the
    labels of a `train.cross_entropy` (`train.linear_cross_entropy`) below
    its logits' (its weight's) rows; an id past them reads outside the
    table. Each such operand is followed back through shape-only ops
    (`tensor.collapse_shape`, `expand_shape`, `reshape`, `extract_slice`,
    `cast`) to the function's `train.input` argument it comes from, which
    is tagged `train.id_bound = N`, the smallest bound of the ops that read
    it. The trainer reads the bound from its manifest and checks every
    token of its data file against it before the first step
    (docs/Data.md). Ids computed from other values are not tagged.

    ```mlir
    func.func @forward(%table: tensor<64x16xf32> {train.param = "embed"},
                       %tokens: tensor<4x8xi32> {train.input = "tokens"}) -> ... {
      %flat = tensor.collapse_shape %tokens [[0, 1]] : tensor<4x8xi32> into tensor<32xi32>
      %h = train.embedding %table[%flat] : tensor<64x16xf32>, tensor<32xi32> -> tensor<32x16xf32>
    // becomes
    func.func @forward(..., %tokens: tensor<4x8xi32> {train.id_bound = 64 : i64,
                                                      train.input = "tokens"}) -> ...
    ```
  }];
}

def TrainMicrobatchPass : Pass<"train-microbatch", "::mlir::ModuleOp"> {
  let summary = "Splits a forward's batch into microbatches whose losses are "
                "summed";
  let description = [{
    Runs on a forward (the function with the `train.loss` result) before
    `train-autodiff`. Every op that carries the batch (dimension 0 of the
    `train.input` arguments, followed through linalg ops' loop dimensions,
    reshapes, element-wise ops, the train ops, and slices and concatenations
    along the dimensions they take whole) is cloned once per
    microbatch on a slice of the inputs, with its types at 1/M of the batch
    and the attribute `train.microbatch = m`. Ops that do not read the batch
    (parameters' casts, constants) stay shared.

    The loss (a `train.cross_entropy` or `train.linear_cross_entropy`) is
    computed per microbatch with `reduction = <sum>`, and the microbatches'
    sums are added. A loss that is scalar ops on one additive reduction of
    the batch to a 0-d tensor (a mean squared error: a sum, then a division
    by the batch's count) takes the sum per microbatch, adds the sums, and
    runs the ops after the sum once, on the total. With `<mean>`, the sum is divided by the whole batch's
    count of labels that are not `ignore_index`, or by 1 when there are
    none. A microbatch whose labels are all ignored adds 0, not NaN.
    Differentiating the result (`train-autodiff`) gives each microbatch's
    backward and accumulates the gradients across them: gradient
    accumulation, which `pp-partition` orders by a pipeline schedule.

    ```mlir
    %h = train.embedding %table[%tokens] : tensor<32x16xf32>, tensor<8x64xi32> -> tensor<8x64x16xf32>
    // with microbatches=2 becomes
    %t0 = tensor.extract_slice %tokens[0, 0] [4, 64] [1, 1] {train.microbatch = 0 : i64} : ...
    %h0 = train.embedding %table[%t0] {train.microbatch = 0 : i64} : tensor<32x16xf32>, tensor<4x64xi32> -> tensor<4x64x16xf32>
    %t1 = tensor.extract_slice %tokens[4, 0] [4, 64] [1, 1] {train.microbatch = 1 : i64} : ...
    %h1 = train.embedding %table[%t1] {train.microbatch = 1 : i64} : ...
    ```

    An op that reduces over the batch (other than the loss), a batch that
    does not divide, or an op whose batch dimension cannot be told is an
    error. The function gets `train.microbatches = M`.
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "How many microbatches the batch is split into (1 leaves the "
           "forward unchanged)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def TrainDropRolesPass : Pass<"train-drop-roles", "::mlir::ModuleOp"> {
  let summary = "Removes the train role attributes from every function";
  let description = [{
    The roles (`train.param`, `train.state`, `train.input`, `train.loss`,
    `train.grad`) say what a training step's arguments and results are;
    once the step is built and described (`trainer-entry-point` records them
    in the manifest), lowering has no use for them, and the train dialect's
    verifier rejects them on the LLVM dialect's types. The lowering
    pipelines start with this pass.

    ```mlir
    func.func @f(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss})
    // becomes
    func.func @f(%w: tensor<4xf32>) -> tensor<f32>
    ```
  }];
}

#endif // LOOM_DIALECT_TRAIN_TRAINPASSES_TD
