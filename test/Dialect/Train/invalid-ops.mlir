// Tests that each train op verifier rule rejects the IR it should.
// RUN: loom-opt %s -split-input-file -verify-diagnostics

func.func @embedding_table_rank(%t: tensor<4xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{expected a table of rank 2, got 'tensor<4xf32>'}}
  %x = train.embedding %t[%ids] : tensor<4xf32>, tensor<2xi32> -> tensor<2x4xf32>
  return
}

// -----

func.func @embedding_width(%t: tensor<10x4xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{expected result last dimension (the table width) to be 4, got 8}}
  %x = train.embedding %t[%ids] : tensor<10x4xf32>, tensor<2xi32> -> tensor<2x8xf32>
  return
}

// -----

func.func @embedding_ids_shape(%t: tensor<10x4xf32>, %ids: tensor<2x3xi32>) {
  // expected-error @+1 {{expected result dimension 1 (the ids') to be 3, got 2}}
  %x = train.embedding %t[%ids] : tensor<10x4xf32>, tensor<2x3xi32> -> tensor<2x2x4xf32>
  return
}

// -----

func.func @embedding_scalar_id(%t: tensor<10x4xf32>, %ids: tensor<i32>) {
  // expected-error @+1 {{expected ids of rank >= 1, got 'tensor<i32>'}}
  %x = train.embedding %t[%ids] : tensor<10x4xf32>, tensor<i32> -> tensor<4xf32>
  return
}

// -----

func.func @embedding_grad_element_type(%g: tensor<2x4xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{expected result element type 'f32', got 'f16'}}
  %t = train.embedding_grad %g[%ids] : tensor<2x4xf32>, tensor<2xi32> -> tensor<10x4xf16>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{expected the weight size (the input's last dimension) to be 8, got 4}}
  %y = train.rms_norm %x, %w eps = 1.0e-5 : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @rms_norm_eps(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{attribute 'eps' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %y = train.rms_norm %x, %w eps = 0.0 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @rope_odd_head_dim(%x: tensor<1x4x2x5xf32>) {
  // expected-error @+1 {{expected a static, even head_dim, got 'tensor<1x4x2x5xf32>'}}
  %y = train.rope %x theta = 10000.0 : tensor<1x4x2x5xf32>
  return
}

// -----

func.func @rope_rank(%x: tensor<4x2x8xf32>) {
  // expected-error @+1 {{expected [batch, seq, heads, head_dim] input of rank 4, got 'tensor<4x2x8xf32>'}}
  %y = train.rope %x theta = 10000.0 : tensor<4x2x8xf32>
  return
}

// -----

func.func @attention_groups(%q: tensor<1x4x6x8xf32>, %k: tensor<1x4x4x8xf32>) {
  // expected-error @+1 {{expected the query heads (6) to be a multiple of the kv heads (4)}}
  %o = train.attention %q, %k, %k causal scale = 0.5 : tensor<1x4x6x8xf32>, tensor<1x4x4x8xf32>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<1x4x4x8xf32>, %k: tensor<1x4x4x16xf32>) {
  // expected-error @+1 {{expected the key head_dim (the query's) to be 8, got 16}}
  %o = train.attention %q, %k, %k scale = 0.5 : tensor<1x4x4x8xf32>, tensor<1x4x4x16xf32>
  return
}

// -----

func.func @attention_causal_lengths(%q: tensor<1x4x4x8xf32>, %k: tensor<1x6x4x8xf32>) {
  // expected-error @+1 {{expected the key sequence length of causal attention (the query's) to be 4, got 6}}
  %o = train.attention %q, %k, %k causal scale = 0.5 : tensor<1x4x4x8xf32>, tensor<1x6x4x8xf32>
  return
}

// -----

// No kv heads: the grouping would divide by zero.
func.func @attention_no_kv_heads(%q: tensor<1x4x4x8xf32>, %k: tensor<1x4x0x8xf32>) {
  // expected-error @+1 {{expected at least one query head, kv head and head_dim element, got 'tensor<1x4x4x8xf32>' and 'tensor<1x4x0x8xf32>'}}
  %o = train.attention %q, %k, %k scale = 0.5 : tensor<1x4x4x8xf32>, tensor<1x4x0x8xf32>
  return
}

// -----

func.func @attention_grad_types(%q: tensor<1x4x4x8xf32>, %k: tensor<1x4x4x8xf32>, %do: tensor<1x4x4x8xf16>) {
  // expected-error @+1 {{all of {query, result_grad, query_grad} have same type}}
  %dq, %dk, %dv = "train.attention_grad"(%q, %k, %k, %do) {scale = 0.5 : f64} : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf16>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>)
  return
}

// -----

func.func @cross_entropy_result(%l: tensor<8x16xf32>, %y: tensor<8xi32>) {
  // expected-error @+1 {{expected result type 'tensor<f32>' for reduction mean, got 'tensor<8xf32>'}}
  %loss = train.cross_entropy %l, %y ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 : tensor<8x16xf32>, tensor<8xi32> -> tensor<8xf32>
  return
}

// -----

func.func @cross_entropy_none_result(%l: tensor<8x16xf32>, %y: tensor<8xi32>) {
  // expected-error @+1 {{expected result type 'tensor<8xf32>' for reduction none, got 'tensor<f32>'}}
  %loss = train.cross_entropy %l, %y ignore_index = -100 reduction = <none> label_smoothing = 0.0 z_loss = 0.0 : tensor<8x16xf32>, tensor<8xi32> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_tokens(%l: tensor<8x16xf32>, %y: tensor<6xi32>) {
  // expected-error @+1 {{expected the number of labels (the logits' tokens) to be 8, got 6}}
  %loss = train.cross_entropy %l, %y ignore_index = -100 reduction = <sum> label_smoothing = 0.0 z_loss = 0.0 : tensor<8x16xf32>, tensor<6xi32> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_smoothing(%l: tensor<8x16xf32>, %y: tensor<8xi32>) {
  // expected-error @+1 {{attribute 'label_smoothing' failed to satisfy constraint: 64-bit float attribute whose value is in [0, 1)}}
  %loss = train.cross_entropy %l, %y ignore_index = -100 reduction = <sum> label_smoothing = 1.0 z_loss = 0.0 : tensor<8x16xf32>, tensor<8xi32> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_z_loss(%l: tensor<8x16xf32>, %y: tensor<8xi32>) {
  // expected-error @+1 {{attribute 'z_loss' failed to satisfy constraint: 64-bit float attribute whose value is non-negative}}
  %loss = train.cross_entropy %l, %y ignore_index = -100 reduction = <sum> label_smoothing = 0.0 z_loss = -1.0 : tensor<8x16xf32>, tensor<8xi32> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_loss_type(%l: tensor<8x16xf32>, %y: tensor<8xi32>, %dl: tensor<f32>) {
  // expected-error @+1 {{expected loss_grad type 'tensor<8xf32>' for reduction none, got 'tensor<f32>'}}
  %g = train.cross_entropy_grad %l, %y, %dl ignore_index = -100 reduction = <none> label_smoothing = 0.0 z_loss = 0.0 : tensor<8x16xf32>, tensor<8xi32>, tensor<f32>
  return
}

// -----

func.func @cross_entropy_float_labels(%l: tensor<8x16xf32>, %y: tensor<8xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of signless integer values, but got 'tensor<8xf32>'}}
  %loss = "train.cross_entropy"(%l, %y) {ignore_index = -100 : i64, reduction = #train.reduction<sum>, label_smoothing = 0.0 : f64, z_loss = 0.0 : f64} : (tensor<8x16xf32>, tensor<8xf32>) -> tensor<f32>
  return
}

// -----

func.func @linear_cross_entropy_hidden_size(%h: tensor<8x16xf32>, %w: tensor<32x12xf32>, %y: tensor<8xi32>) {
  // expected-error @+1 {{expected the weight's hidden size (dimension 1) to be 16, got 12}}
  %loss, %lse = train.linear_cross_entropy %h, %w, %y ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 4 : tensor<8x16xf32>, tensor<32x12xf32>, tensor<8xi32> -> tensor<f32>, tensor<8xf32>
  return
}

// -----

func.func @linear_cross_entropy_bf16_loss(%h: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %y: tensor<8xi32>) {
  // expected-error @+1 {{expected loss type 'tensor<f32>' for reduction mean, got 'tensor<bf16>'}}
  %loss, %lse = train.linear_cross_entropy %h, %w, %y ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 4 : tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<8xi32> -> tensor<bf16>, tensor<8xf32>
  return
}

// -----

func.func @linear_cross_entropy_chunk(%h: tensor<8x16xf32>, %w: tensor<32x16xf32>, %y: tensor<8xi32>) {
  // expected-error @+1 {{attribute 'chunk_tokens' failed to satisfy constraint}}
  %loss, %lse = train.linear_cross_entropy %h, %w, %y ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 0 : tensor<8x16xf32>, tensor<32x16xf32>, tensor<8xi32> -> tensor<f32>, tensor<8xf32>
  return
}

// -----

func.func @linear_cross_entropy_grad_none(%h: tensor<8x16xf32>, %w: tensor<32x16xf32>, %y: tensor<8xi32>, %lse: tensor<8xf32>, %dl: tensor<f32>) {
  // expected-error @+1 {{expected loss_grad type 'tensor<8xf32>' for reduction none, got 'tensor<f32>'}}
  %dh, %dw = train.linear_cross_entropy_grad %h, %w, %y, %lse, %dl ignore_index = -100 reduction = <none> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 4 : tensor<8x16xf32>, tensor<32x16xf32>, tensor<8xi32>, tensor<8xf32>, tensor<f32>
  return
}

// -----

func.func @linear_cross_entropy_bias_size(%h: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<30xf32>, %y: tensor<8xi32>) {
  // expected-error @+1 {{expected the bias size (the weight's vocabulary) to be 32, got 30}}
  %loss, %lse = train.linear_cross_entropy %h, %w bias %b, %y ignore_index = -100 reduction = <mean> label_smoothing = 0.0 z_loss = 0.0 softcap = 0.0 chunk_tokens = 4 : tensor<8x16xf32>, tensor<32x16xf32>, tensor<8xi32>, tensor<30xf32> -> tensor<f32>, tensor<8xf32>
  return
}

// -----

func.func @call_kernel_read_outputs_range(%a: tensor<4xf32>, %x: tensor<16xf32>) {
  // expected-error @+1 {{read_outputs must list output indices in increasing order, each below 1}}
  %g = train.call_kernel @k() ins(%a : tensor<4xf32>) outs(%x : tensor<16xf32>) {read_outputs = array<i64: 1>} -> tensor<16xf32>
  return
}

// -----

func.func @call_kernel_read_outputs_order(%a: tensor<4xf32>, %x: tensor<16xf32>) {
  // expected-error @+1 {{read_outputs must list output indices in increasing order, each below 2}}
  %g:2 = train.call_kernel @k() ins(%a : tensor<4xf32>) outs(%x, %x : tensor<16xf32>, tensor<16xf32>) {read_outputs = array<i64: 1, 0>} -> tensor<16xf32>, tensor<16xf32>
  return
}
