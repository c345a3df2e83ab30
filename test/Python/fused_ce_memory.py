# Tests that fusing the loss shrinks a training step's memory timeline by at
# least the logits (tokens x vocab x 4 bytes) at Llama 3's 128,256-token
# vocabulary, that the fused loss's own working memory stays near one chunk
# of logits, and that the plan packs both steps to the timeline's bound.
# RUN: %python %s | FileCheck %s
# CHECK: fused: the timeline drops by {{[0-9.]+}}x the logits
# CHECK: loss layer: {{[0-9.]+}}x the logits unfused, 1.00{{[0-9]}} chunks fused
# CHECK: vocabulary blocks: 0.{{[0-9]+}}x the token-chunk working memory
# CHECK: both plans reach the live bound

import dataclasses
import sys

from loom.memory import loss_layer_extra, step_memory
from loom.models.llama import CONFIGS, build_forward

cfg = dataclasses.replace(CONFIGS["tiny"], layers=1, vocab=128256, seq=256, batch=8)
tokens, chunk = cfg.seq * cfg.batch, 16
forward = build_forward(cfg)
unfused = step_memory(forward)
fused = step_memory(forward, fuse_chunk=chunk)
logits = tokens * cfg.vocab * 4
drop = unfused["timeline"] - fused["timeline"]
print(f"unfused {unfused}\nfused {fused}\nlogits {logits} bytes")
if drop < logits:
    print(f"FAIL: the timeline drops by {drop} bytes, less than the logits ({logits})")
    sys.exit(1)
print(f"fused: the timeline drops by {drop / logits:.2f}x the logits")

# The loss layer alone (forward and backward): what it holds beyond its
# arguments and the gradients it returns. Unfused, that is the logits and
# their gradient; fused, one [chunk, vocab] block (the logits, then their
# gradient in place) and a few per-token vectors (the target: at
# most chunk x vocab).
layer = loss_layer_extra(tokens, cfg.dim, cfg.vocab)
fused_layer = loss_layer_extra(tokens, cfg.dim, cfg.vocab, fuse_chunk=chunk)
block = chunk * cfg.vocab * 4
print(f"loss layer: unfused extra {layer['extra']}, fused extra {fused_layer['extra']}, one chunk {block}")
if layer["extra"] < logits or fused_layer["extra"] > block + 8 * tokens * 4:
    print("FAIL: the loss layer's working memory is not the logits unfused and one chunk fused")
    sys.exit(1)
print(f"loss layer: {layer['extra'] / logits:.2f}x the logits unfused, "
      f"{fused_layer['extra'] / block:.3f} chunks fused")

# With vocabulary blocks of 8,016 entries (16 blocks) the working memory
# is one [chunk, 8016] block plus the per-token vectors.
blocked = loss_layer_extra(tokens, cfg.dim, cfg.vocab, fuse_chunk=chunk, fuse_vocab=8016)
small = chunk * 8016 * 4
print(f"vocabulary blocks: extra {blocked['extra']}, one block {small}")
if blocked["extra"] > small + 8 * tokens * 4:
    print("FAIL: vocabulary blocks hold more than one block")
    sys.exit(1)
print(f"vocabulary blocks: {blocked['extra'] / fused_layer['extra']:.3f}x the token-chunk working memory")
if unfused["arena"] != unfused["bound"] or fused["arena"] != fused["bound"]:
    print("FAIL: a plan is above its live bound")
    sys.exit(1)
print("both plans reach the live bound")
