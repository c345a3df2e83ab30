"""The static memory analysis of a step, as loomc plans it.

:func:`step_memory` compiles a forward in-process up to the memory-plan
phase (:func:`loom.compile` with ``emit="memory-plan"``, as ``loomc
--emit=memory-plan``: the training step, the decomposed train ops
and ``codegen-memory-plan``, the same pipelines a trainer is compiled with)
and returns what the plan reports: the memory timeline's peak (loop bodies
included, as the trainer runs them), the arena and its live bound, all in
bytes.
"""

from __future__ import annotations

import re

from loom.compiler import compile  # noqa: A004

_ATTRS = {"timeline": "train.timeline_peak_bytes", "arena": "train.arena_bytes",
          "bound": "train.arena_bound_bytes"}


def step_memory(forward: str, fuse_chunk: int = 0, optimizer: str | None = "adamw",
                fuse_vocab: int = 0, target: str = "cpu") -> dict[str, int]:
    """Compiles ``forward`` with loomc to its planned step (after fusing its
    loss into chunks of ``fuse_chunk`` tokens, and blocks of ``fuse_vocab``
    vocabulary entries, when positive; with ``optimizer``'s update unless
    None) and returns the plan's figures."""
    out = compile(forward, emit="memory-plan", target=target, fuse_cross_entropy=fuse_chunk,
                  fuse_cross_entropy_vocab=fuse_vocab, optimizer=optimizer or "none").text
    figures = {}
    for key, attr in _ATTRS.items():
        match = re.search(re.escape(attr) + r" = (\d+)", out)
        if not match:
            raise ValueError(f"codegen-memory-plan did not report {attr}")
        figures[key] = int(match.group(1))
    return figures


def loss_layer(tokens: int, hidden: int, vocab: int) -> str:
    """A forward that is only a model's loss layer: f32 hidden states and an
    output weight (both parameters, so the step returns their gradients),
    projected to the vocabulary and scored by mean cross-entropy."""
    h, w, y = f"tensor<{tokens}x{hidden}xf32>", f"tensor<{vocab}x{hidden}xf32>", f"tensor<{tokens}xi32>"
    logits = f"tensor<{tokens}x{vocab}xf32>"
    return f"""func.func @loss_layer(%h: {h} {{train.param = "hidden"}}, %w: {w} {{train.param = "output"}},
                       %labels: {y} {{train.input = "labels"}}) -> (tensor<f32> {{train.loss}}) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {logits}
  %z = linalg.fill ins(%zero : f32) outs(%e : {logits}) -> {logits}
  %logits = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>,
                                           affine_map<(m, n, k) -> (m, n)>]
      ins(%h, %w : {h}, {w}) outs(%z : {logits}) -> {logits}
  %loss = train.cross_entropy %logits, %labels ignore_index = -100 reduction = <mean> label_smoothing = 0.0
      z_loss = 0.0 : {logits}, {y} -> tensor<f32>
  return %loss : tensor<f32>
}}
"""


def loss_layer_extra(tokens: int, hidden: int, vocab: int, fuse_chunk: int = 0,
                     fuse_vocab: int = 0) -> dict[str, int]:
    """The loss layer's training step (forward and backward, no optimizer):
    its timeline peak, and the bytes above its arguments and the gradients
    it returns (the layer's working memory)."""
    figures = step_memory(loss_layer(tokens, hidden, vocab), fuse_chunk, optimizer=None,
                          fuse_vocab=fuse_vocab)
    fixed = 2 * 4 * (tokens * hidden + vocab * hidden) + 4 * tokens + 4
    figures["extra"] = figures["timeline"] - fixed
    return figures
