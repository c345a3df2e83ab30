//===- TrainOps.td - train operations ----------------------*- tablegen -*-===//
//
// Ops for the parts of a training step that linalg does not say well. Every
// op can be decomposed to linalg (`train-decompose`) for targets without a
// kernel, and `train-autodiff` knows the gradient of each.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_TRAIN_TRAINOPS_TD
#define LOOM_DIALECT_TRAIN_TRAINOPS_TD

include "loom/Dialect/Train/TrainDialect.td"
include "loom/Dialect/Train/TrainInterfaces.td"
include "loom/Dialect/Train/TrainTargetAttrs.td"
include "loom/Dialect/Train/TrainContractAttrs.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Train_PositiveF64Attr : ConfinedAttr<F64Attr, [
    AttrConstraint<CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() > 0.0">,
                   "whose value is positive">]>;
def Train_UnitIntervalF64Attr : ConfinedAttr<F64Attr, [
    AttrConstraint<CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0 && "
                         "::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() < 1.0">,
                   "whose value is in [0, 1)">]>;
def Train_NonNegativeF64Attr : ConfinedAttr<F64Attr, [
    AttrConstraint<CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0">,
                   "whose value is non-negative">]>;

def Train_LossReduction : I32EnumAttr<"LossReduction",
    "how per-token losses are combined", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Mean", 1, "mean">,
      I32EnumAttrCase<"Sum", 2, "sum">,
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom::train";
}
def Train_LossReductionAttr : EnumAttr<Train_Dialect, Train_LossReduction,
                                       "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

def Train_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Train_IntTensor : RankedTensorOf<[AnySignlessInteger]>;

/// Pure ops that decompose to linalg.
class Train_DecomposableOp<string mnemonic, list<Trait> traits = []>
    : Train_Op<mnemonic, !listconcat(traits, [
        Pure, DeclareOpInterfaceMethods<Train_DecomposableOpInterface>])> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

def Train_EmbeddingOp : Train_DecomposableOp<"embedding"> {
  let summary = "looks up rows of a table by integer ids";
  let description = [{
    `result[i..., d] = table[ids[i...], d]`. Ids must lie in `[0, rows)`; the
    data loader guarantees it (an out-of-range id is undefined behaviour, as
    in every embedding kernel).

    ```mlir
    %x = train.embedding %table[%tokens]
        : tensor<256x64xf32>, tensor<4x32xi32> -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$table, Train_IntTensor:$ids);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $table `[` $ids `]` attr-dict `:` type($table) `,` type($ids) `->` type($result)
  }];
}

def Train_EmbeddingGradOp : Train_DecomposableOp<"embedding_grad"> {
  let summary = "accumulates row gradients into a table-shaped gradient";
  let description = [{
    The gradient of `train.embedding` with respect to its table:
    `result[v, d] = sum over i... with ids[i...] == v of grad[i..., d]`.

    ```mlir
    %dtable = train.embedding_grad %dx[%tokens]
        : tensor<4x32x64xf32>, tensor<4x32xi32> -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$grad, Train_IntTensor:$ids);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `[` $ids `]` attr-dict `:` type($grad) `,` type($ids) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// RMSNorm and rotary embedding
//===----------------------------------------------------------------------===//

def Train_RMSNormOp : Train_DecomposableOp<"rms_norm",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "normalises the last dimension by its root mean square";
  let description = [{
    `result = input / sqrt(mean(input^2, last dim) + eps) * weight`, computed
    in the input's element type.

    ```mlir
    %y = train.rms_norm %x, %w eps = 1.0e-05
        : tensor<4x32x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$weight,
                       Train_PositiveF64Attr:$eps);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` `=` $eps attr-dict `:` type($input) `,` type($weight)
  }];
}

def Train_RoPEOp : Train_DecomposableOp<"rope",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "applies rotary position embedding to queries or keys";
  let description = [{
    `input` is `[batch, seq, heads, head_dim]`; position `s` rotates the pair
    `(x[j], x[j + head_dim/2])` by the angle `s * theta^(-2j/head_dim)`
    (the "rotate half" layout of Llama):

    ```
      out[j]          = x[j] * cos - x[j + h/2] * sin
      out[j + h/2]    = x[j + h/2] * cos + x[j] * sin
    ```

    ```mlir
    %q2 = train.rope %q theta = 500000.0 : tensor<4x32x8x16xf32>
    ```

    With `inverse`, each pair turns by the negative angle (`sin` changes
    sign): the inverse of the rotation and its transpose, so the gradient of
    a `train.rope` is the `inverse` one of the result's gradient (what
    `train-autodiff` builds), decomposed like the forward, each half written
    into its slice of the result.

    ```mlir
    %dq = train.rope %dq2 theta = 500000.0 inverse : tensor<4x32x8x16xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_PositiveF64Attr:$theta,
                       UnitAttr:$inverse);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat =
      "$input `theta` `=` $theta (`inverse` $inverse^)? attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Train_AttentionOp : Train_DecomposableOp<"attention", [
    AllTypesMatch<["query", "result"]>, AllTypesMatch<["key", "value"]>]> {
  let summary = "scaled dot-product attention with grouped key/value heads";
  let description = [{
    `query` is `[batch, seq, heads, head_dim]`, `key` and `value` are
    `[batch, seq, kv_heads, head_dim]` with `heads` a multiple of `kv_heads`
    (grouped-query attention: query head `h` reads kv head
    `h / (heads / kv_heads)`). With `causal`, position `s` attends to
    positions `<= s`.

    ```
      scores = scale * q k^T  (masked)   p = softmax(scores)   out = p v
    ```

    ```mlir
    %o = train.attention %q, %k, %v causal scale = 0.25
        : tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$query, Train_FloatTensor:$key,
                       Train_FloatTensor:$value, UnitAttr:$causal,
                       Train_PositiveF64Attr:$scale);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`causal` $causal^)? `scale` `=` $scale attr-dict
    `:` type($query) `,` type($key)
  }];
}

def Train_AttentionGradOp : Train_DecomposableOp<"attention_grad", [
    AllTypesMatch<["query", "result_grad", "query_grad"]>,
    AllTypesMatch<["key", "value", "key_grad", "value_grad"]>]> {
  let summary = "gradients of train.attention for its three inputs";
  let description = [{
    Recomputes the attention probabilities from `query` and `key` (nothing of
    size seq x seq is saved from the forward) and returns the gradients of
    the query, key and value given the gradient of the output:

    ```
      dv = p^T dout     dp = dout v^T     ds = p * (dp - rowsum(dp * p))
      dq = scale * ds k                   dk = scale * ds^T q
    ```

    summed over the query heads of each kv group for `dk` and `dv`.

    ```mlir
    %dq, %dk, %dv = train.attention_grad %q, %k, %v, %dout causal scale = 0.25
        : tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$query, Train_FloatTensor:$key,
                       Train_FloatTensor:$value, Train_FloatTensor:$result_grad,
                       UnitAttr:$causal, Train_PositiveF64Attr:$scale);
  let results = (outs Train_FloatTensor:$query_grad, Train_FloatTensor:$key_grad,
                      Train_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $result_grad (`causal` $causal^)? `scale` `=`
    $scale attr-dict `:` type($query) `,` type($key)
  }];
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

def Train_CrossEntropyOp : Train_DecomposableOp<"cross_entropy"> {
  let summary = "softmax cross-entropy of logits against integer labels";
  let description = [{
    `logits` is `[tokens, vocab]`, `labels` is `[tokens]`. For each token with
    `labels[i] != ignore_index`, with `lse = log(sum(exp(logits[i])))`:

    ```
      loss[i] = (1 - label_smoothing) * (lse - logits[i, labels[i]])
              + label_smoothing * (lse - mean(logits[i]))
              + z_loss * lse^2
    ```

    and 0 for ignored tokens. `reduction = <mean>` divides the sum by the
    number of tokens not ignored (0 when every token is ignored, where
    PyTorch returns NaN); `<sum>` sums; `<none>` returns `loss` as
    `tensor<tokens>`. Math is done in the logits' type; use f32 logits for
    bf16 models until the fused loss lands.

    ```mlir
    %loss = train.cross_entropy %logits, %labels ignore_index = -100
        reduction = <mean> label_smoothing = 0.0 z_loss = 0.0
        : tensor<128x256xf32>, tensor<128xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$logits, Train_IntTensor:$labels,
                       I64Attr:$ignore_index, Train_LossReductionAttr:$reduction,
                       Train_UnitIntervalF64Attr:$label_smoothing,
                       Train_NonNegativeF64Attr:$z_loss);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `ignore_index` `=` $ignore_index `reduction` `=` $reduction
    `label_smoothing` `=` $label_smoothing `z_loss` `=` $z_loss attr-dict
    `:` type($logits) `,` type($labels) `->` type($result)
  }];
}

def Train_CrossEntropyGradOp : Train_DecomposableOp<"cross_entropy_grad",
    [AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of train.cross_entropy with respect to the logits";
  let description = [{
    Given the gradient of the loss (`tensor<f32>` for mean and sum,
    `tensor<tokens>` for none), returns the gradient of the logits:

    ```
      dlogits[i, j] = w[i] * ((1 - ls) * (p[i, j] - [j == labels[i]])
                             + ls * (p[i, j] - 1 / vocab)
                             + 2 * z_loss * lse[i] * p[i, j])
    ```

    with `p = softmax(logits[i])`, `w[i] = 0` for ignored tokens and the
    reduction's scale times the incoming gradient otherwise.

    ```mlir
    %dlogits = train.cross_entropy_grad %logits, %labels, %dloss ignore_index = -100
        reduction = <mean> label_smoothing = 0.0 z_loss = 0.0
        : tensor<128x256xf32>, tensor<128xi32>, tensor<f32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$logits, Train_IntTensor:$labels,
                       Train_FloatTensor:$loss_grad,
                       I64Attr:$ignore_index, Train_LossReductionAttr:$reduction,
                       Train_UnitIntervalF64Attr:$label_smoothing,
                       Train_NonNegativeF64Attr:$z_loss);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $loss_grad `ignore_index` `=` $ignore_index
    `reduction` `=` $reduction `label_smoothing` `=` $label_smoothing
    `z_loss` `=` $z_loss attr-dict
    `:` type($logits) `,` type($labels) `,` type($loss_grad)
  }];
}

//===----------------------------------------------------------------------===//
// Fused linear + cross-entropy
//===----------------------------------------------------------------------===//

def Train_PositiveI64Attr : ConfinedAttr<I64Attr, [IntPositive]>;
// Vocabulary entries per block; 0 (the default) for the whole vocabulary.
def Train_ChunkVocabAttr
    : DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">;

def Train_LinearCrossEntropyOp : Train_DecomposableOp<"linear_cross_entropy"> {
  let summary = "cross-entropy of a linear projection, without its logits";
  let description = [{
    `hidden` is `[tokens, hidden]`, `weight` is `[vocab, hidden]` (PyTorch's
    `nn.Linear` layout), the optional `bias` is `[vocab]` and `labels` is
    `[tokens]`. The op computes what `train.cross_entropy` computes on
    `logits = hidden @ weightᵀ (+ bias)`, optionally
    soft-capped (`softcap > 0`: `logits = softcap * tanh(logits / softcap)`,
    Gemma 2's), without ever holding `[tokens, vocab]` logits: its
    decomposition loops over chunks of `chunk_tokens` tokens, and holds one
    `[chunk_tokens, vocab]` block at a time; with `chunk_vocab > 0` it also
    loops over blocks of that many vocabulary entries (an online
    log-sum-exp), holding one `[chunk_tokens, chunk_vocab]` block. A size
    that does not divide the tokens (or the vocabulary) is lowered to the
    largest divisor below it. The second result is the
    log-sum-exp of each token's logits, which the gradient reads instead of
    the logits. Math is f32 for f16/bf16 operands (the results are f32).

    ```mlir
    %loss, %lse = train.linear_cross_entropy %h, %w, %labels
        ignore_index = -100 reduction = <mean> label_smoothing = 0.0
        z_loss = 0.0 softcap = 0.0 chunk_tokens = 64
        : tensor<128x64xf32>, tensor<256x64xf32>, tensor<128xi32>
        -> tensor<f32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$hidden, Train_FloatTensor:$weight,
                       Optional<Train_FloatTensor>:$bias,
                       Train_IntTensor:$labels,
                       I64Attr:$ignore_index, Train_LossReductionAttr:$reduction,
                       Train_UnitIntervalF64Attr:$label_smoothing,
                       Train_NonNegativeF64Attr:$z_loss,
                       Train_NonNegativeF64Attr:$softcap,
                       Train_PositiveI64Attr:$chunk_tokens,
                       Train_ChunkVocabAttr:$chunk_vocab);
  let results = (outs Train_FloatTensor:$loss, Train_FloatTensor:$lse);
  let assemblyFormat = [{
    $hidden `,` $weight (`bias` $bias^)? `,` $labels `ignore_index` `=` $ignore_index
    `reduction` `=` $reduction `label_smoothing` `=` $label_smoothing
    `z_loss` `=` $z_loss `softcap` `=` $softcap `chunk_tokens` `=` $chunk_tokens
    (`chunk_vocab` `=` $chunk_vocab^)?
    attr-dict `:` type($hidden) `,` type($weight) `,` type($labels)
    (`,` type($bias)^)? `->` type($loss) `,` type($lse)
  }];
}

def Train_LinearCrossEntropyGradOp
    : Train_DecomposableOp<"linear_cross_entropy_grad",
        [AllTypesMatch<["hidden", "hidden_grad"]>,
         AllTypesMatch<["weight", "weight_grad"]>]> {
  let summary = "gradients of train.linear_cross_entropy";
  let description = [{
    Given the forward's operands, its log-sum-exp and the gradient of the
    loss, returns the gradients of `hidden`, `weight` and (with a bias) of
    `bias`. The decomposition
    recomputes each chunk's logits, forms their gradient (as
    `train.cross_entropy_grad` does, times the soft-cap's derivative) and
    accumulates `dhidden = dlogits @ weight` and `dweight += dlogitsᵀ @ hidden`
    chunk by chunk: nothing of size `[tokens, vocab]`.

    ```mlir
    %dh, %dw = train.linear_cross_entropy_grad %h, %w, %labels, %lse, %dloss
        ignore_index = -100 reduction = <mean> label_smoothing = 0.0
        z_loss = 0.0 softcap = 0.0 chunk_tokens = 64
        : tensor<128x64xf32>, tensor<256x64xf32>, tensor<128xi32>,
          tensor<128xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$hidden, Train_FloatTensor:$weight,
                       Optional<Train_FloatTensor>:$bias,
                       Train_IntTensor:$labels, Train_FloatTensor:$lse,
                       Train_FloatTensor:$loss_grad,
                       I64Attr:$ignore_index, Train_LossReductionAttr:$reduction,
                       Train_UnitIntervalF64Attr:$label_smoothing,
                       Train_NonNegativeF64Attr:$z_loss,
                       Train_NonNegativeF64Attr:$softcap,
                       Train_PositiveI64Attr:$chunk_tokens,
                       Train_ChunkVocabAttr:$chunk_vocab);
  let results = (outs Train_FloatTensor:$hidden_grad,
                      Train_FloatTensor:$weight_grad,
                      Optional<Train_FloatTensor>:$bias_grad);
  let assemblyFormat = [{
    $hidden `,` $weight (`bias` $bias^)? `,` $labels `,` $lse `,` $loss_grad
    `ignore_index` `=` $ignore_index
    `reduction` `=` $reduction `label_smoothing` `=` $label_smoothing
    `z_loss` `=` $z_loss `softcap` `=` $softcap `chunk_tokens` `=` $chunk_tokens
    (`chunk_vocab` `=` $chunk_vocab^)?
    attr-dict `:` type($hidden) `,` type($weight) `,` type($labels) `,`
    type($lse) `,` type($loss_grad) (`,` type($bias)^)?
    (`->` type($bias_grad)^)?
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$hidden, "::mlir::Value":$weight,
                   "::mlir::Value":$labels, "::mlir::Value":$lse,
                   "::mlir::Value":$loss_grad, "LinearCrossEntropyOp":$forward), [{
      ::llvm::SmallVector<::mlir::Type> types = {hidden.getType(),
                                                 weight.getType()};
      if (forward.getBias())
        types.push_back(forward.getBias().getType());
      build($_builder, $_state, types, hidden, weight, forward.getBias(),
            labels, lse, loss_grad, forward.getIgnoreIndexAttr(),
            forward.getReductionAttr(), forward.getLabelSmoothingAttr(),
            forward.getZLossAttr(), forward.getSoftcapAttr(),
            forward.getChunkTokensAttr(), forward.getChunkVocabAttr());
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// Runtime kernels
//===----------------------------------------------------------------------===//

def Train_CallKernelOp : Train_Op<"call_kernel", [
    AttrSizedOperandSegments, DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<ConditionallySpeculatable>]> {
  let summary = "a runtime kernel in destination-passing style";
  let description = [{
    Calls the runtime function `callee`, which reads `inputs` and overwrites
    `outputs`, with `scalars` after them. It never reads an output unless
    `read_outputs` lists its index: such an output is updated in place (the
    kernel reads its init, then overwrites it). On tensors
    the op returns the new values of `outputs`, like a linalg op, so that
    the memory timeline, the memory plan and one-shot bufferisation place
    its results; on buffers it returns nothing. `convert-train-kernels-to-calls`
    lowers it, on buffers, to a `func.call` of `callee` with each buffer's
    aligned address (contiguous row-major, copied there if need be) and then
    the scalars. `train-fuse-attention` makes the fused attention kernels.
    On tensors the op is pure (a runtime kernel is a function of what it
    reads), so it may be recomputed or erased like a linalg op; on buffers
    it reads and writes them.

    ```mlir
    %o, %lse = train.call_kernel @loomrt_attention_f32(%b, %s, %h, %kvh, %d,
        %causal, %scale : i64, i64, i64, i64, i64, i32, f32)
        ins(%q, %k, %v : tensor<4x32x8x16xf32>, tensor<4x32x2x16xf32>,
                         tensor<4x32x2x16xf32>)
        outs(%e0, %e1 : tensor<4x32x8x16xf32>, tensor<4x8x32xf32>)
        -> tensor<4x32x8x16xf32>, tensor<4x8x32xf32>
    ```

    The fused loss's gradient kernel turns a chunk's logits into their
    gradient in place:

    ```mlir
    %g = train.call_kernel @loomrt_cross_entropy_grad_f32(%rows, %vocab,
        %offset, %total, %smoothing, %z, %cap : i64, i64, i64, i64, f64, f64,
        f64)
        ins(%labels, %lse, %w : tensor<256xi32>, tensor<256xf32>,
                                tensor<256xf32>)
        outs(%logits : tensor<256x32000xf32>) {read_outputs = array<i64: 0>}
        -> tensor<256x32000xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee, Variadic<AnyShaped>:$inputs,
                       Variadic<AnyShaped>:$outputs,
                       Variadic<AnyTypeOf<[AnySignlessInteger, AnyFloat]>>:$scalars,
                       OptionalAttr<DenseI64ArrayAttr>:$read_outputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $callee `(` ($scalars^ `:` type($scalars))? `)`
    `ins` `(` $inputs `:` type($inputs) `)`
    `outs` `(` $outputs `:` type($outputs) `)`
    attr-dict (`->` type($results)^)?
  }];
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
    /// Whether the kernel reads output `index` (read_outputs lists it).
    bool readsOutput(unsigned index) {
      return getReadOutputs() &&
             llvm::is_contained(*getReadOutputs(), int64_t(index));
    }
  }];
  let hasVerifier = 1;
}

#endif // LOOM_DIALECT_TRAIN_TRAINOPS_TD
