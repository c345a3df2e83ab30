"""The models the importer's tests train (issue: bring your own model): four
Hugging Face causal LMs built from small configs with random weights, and
two hand-written modules. Each is returned in the importer's form: a module
whose forward takes the example batch and returns the loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import loom.frontend.torch as lt

VOCAB = 256

class Decoder(torch.nn.Module):
    """A small decoder-only transformer: learned positions, pre-LayerNorm
    blocks with fused QKV, causal SDPA and a GELU MLP, untied head."""

    def __init__(self, vocab=VOCAB, dim=64, heads=4, layers=2, seq=64):
        super().__init__()
        self.heads = heads
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(torch.nn.ModuleDict({
                "ln1": torch.nn.LayerNorm(dim), "qkv": torch.nn.Linear(dim, 3 * dim),
                "proj": torch.nn.Linear(dim, dim), "ln2": torch.nn.LayerNorm(dim),
                "up": torch.nn.Linear(dim, 4 * dim), "down": torch.nn.Linear(4 * dim, dim)}))
        self.ln = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, labels):
        b, s = tokens.shape
        x = self.tok(tokens) + self.pos[:s]
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(x.shape[-1], dim=-1)
            q, k, v = (t.view(b, s, self.heads, -1).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + blk["proj"](a.transpose(1, 2).reshape(b, s, -1))
            x = x + blk["down"](F.gelu(blk["up"](blk["ln2"](x))))
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))

class MLPRegression(torch.nn.Module):
    """Two hidden layers (ReLU, tanh) and a mean squared error; the layers
    are numbered, so that pipeline stages can split them."""

    def __init__(self, features=16, hidden=32):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(features, hidden), torch.nn.Linear(hidden, hidden)])
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, x, y):
        h = torch.tanh(self.layers[1](torch.relu(self.layers[0](x))))
        return F.mse_loss(self.out(h).squeeze(-1), y)


def hf(name: str, tied: bool | None = None) -> torch.nn.Module:
    import transformers as T
    small = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    if name == "llama":
        return T.LlamaForCausalLM(T.LlamaConfig(**small))
    if name == "mistral":
        return T.MistralForCausalLM(T.MistralConfig(**small))
    if name == "qwen3":
        return T.Qwen3ForCausalLM(T.Qwen3Config(**small, head_dim=16,
                                                 tie_word_embeddings=True if tied is None else tied))
    if name == "gpt2":
        return T.GPT2LMHeadModel(T.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                              tie_word_embeddings=True if tied is None else tied))
    raise ValueError(name)

LANGUAGE_MODELS = ("llama", "qwen3", "mistral", "gpt2", "decoder")
TIED = {"qwen3", "gpt2"}

def make(name: str, seed: int = 0, tied: bool | None = None) -> torch.nn.Module:
    """The model ``name`` in the importer's form, from ``seed``."""
    torch.manual_seed(seed)
    if name == "decoder":
        return Decoder()
    if name == "mlp":
        return MLPRegression()
    return lt.causal_lm_loss(hf(name, tied))

def example(name: str, batch: int, seq: int, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """An example batch of the model's input shapes (``seq`` is the features
    for the MLP)."""
    if name == "mlp":
        g = torch.Generator().manual_seed(1)
        return (torch.randn(batch, 16, generator=g, dtype=dtype), torch.randn(batch, generator=g, dtype=dtype))
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, VOCAB, (batch, seq), generator=g), torch.randint(0, VOCAB, (batch, seq), generator=g))

