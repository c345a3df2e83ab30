#!/usr/bin/env python3
"""Your own PyTorch model through Loom: a Hugging Face Qwen3 (built from a
small config, random weights, tied embeddings), imported, trained on a
uint16 token file for 100 steps on 2 ranks with ZeRO-3, exported to
safetensors under Hugging Face's names, and evaluated in PyTorch.

    scripts/torch-python examples/train_qwen3.py [--dir DIR] [--steps N]

Prints each stage and, at the end, the loss of the exported weights in
PyTorch beside Loom's loss on the same batch; exits 1 if they differ by
more than 1e-6 relative.
"""

import argparse
import os

import numpy as np
import torch
import transformers
from safetensors.torch import load_file

import loom
import loom.frontend.torch as lt
from loom.checkpoint import export_safetensors

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--dir", default="qwen3-run")
parser.add_argument("--steps", type=int, default=100)
args = parser.parse_args()
os.makedirs(args.dir, exist_ok=True)

# 1. The model, in the importer's form: forward(tokens, labels) -> loss.
config = transformers.Qwen3Config(vocab_size=512, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                                  num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                  max_position_embeddings=256, tie_word_embeddings=True)
torch.manual_seed(0)
model = lt.causal_lm_loss(transformers.Qwen3ForCausalLM(config))
batch, seq = 4, 64  # one rank's batch

# 2. A uint16 token file (nanoGPT's train.bin form): here, byte-level ids of
# an installed text (the same bytes on every Debian machine).
text = open("/usr/share/common-licenses/GPL-3", "rb").read()
data = os.path.join(args.dir, "train.bin")
np.frombuffer(text, np.uint8).astype("<u2").tofile(data)
print(f"tokens: {len(text):,} in {data}")

# 3. Import and compile: 2 ranks of ZeRO-3, the module's own weights as the start.
example = (torch.zeros(batch, seq, dtype=torch.long),) * 2
trainer = loom.compile(model, example, output=os.path.join(args.dir, "trainer"), world_size=2, zero_stage=3,
                       lr=1e-3)
print(f"compiled {trainer.path}: planned peak {trainer.plans[0]['peak_bytes'] / 2**20:.1f} MiB a rank; "
      f"tied: {trainer.imported.tied}")

# 4. Train.
checkpoint = os.path.join(args.dir, "ckpt")
rows = trainer.run(data, steps=args.steps + 1, ranks=2, checkpoint=checkpoint,
                   args=["--data-format", "uint16", "--checkpoint-every", str(args.steps)],
                   env={"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                        "OMPI_MCA_rmaps_base_oversubscribe": "1"})
block = max(1, args.steps // 5)
for first in range(0, args.steps, block):
    losses = [row["loss"] for row in rows[first:first + block]]
    print(f"steps {first:3d}-{first + len(losses) - 1:3d}  mean loss {sum(losses) / len(losses):.4f}")

# 5. Export under Hugging Face's names (the tied lm_head.weight restored)
# and evaluate in PyTorch on the batch of Loom's next step.
exported = os.path.join(args.dir, "model.safetensors")
export_safetensors(os.path.join(checkpoint, f"step-{args.steps}"), exported, tied=trainer.imported.tied)
fresh = transformers.Qwen3ForCausalLM(config)
fresh.load_state_dict(load_file(exported), strict=True)
tokens = np.fromfile(data, "<u2").astype(np.int64)
windows, rows_per_step = len(tokens) - seq - 1, 2 * batch
starts = [((args.steps * rows_per_step + k) * seq) % windows for k in range(rows_per_step)]
x = torch.tensor(np.stack([tokens[s:s + seq] for s in starts]))
y = torch.tensor(np.stack([tokens[s + 1:s + seq + 1] for s in starts]))
with torch.no_grad():
    loss = lt.causal_lm_loss(fresh)(x, y).item()
want = rows[args.steps]["loss"]
error = abs(loss - want) / want
print(f"PyTorch on {exported}: loss {loss:.6f}; Loom's step {args.steps}: {want:.6f} (relative {error:.1e})")
raise SystemExit(0 if error <= 1e-6 else 1)
