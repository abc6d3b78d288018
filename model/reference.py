"""A nanoGPT-style reference GPT (one fused ``c_attn`` projection, ``scaled_dot_product_attention``), the model
the speed benchmark compares ours against; a test loads our weights into it and checks the logits agree."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RefBlock(nn.Module):
    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class RefGPT(nn.Module):
    def __init__(self, vocab: int, block: int, d: int = 64, n_heads: int = 4, n_layers: int = 2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(RefBlock(d, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))  # on idx's device
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def nanogpt_init(model: RefGPT) -> RefGPT:
    """nanoGPT's initialisation (normal, std 0.02; the residual projections scaled by 1/sqrt(2 * n_layers); zero
    biases) -- the one our model uses too, so a reference trained beside ours starts alike."""
    n_layers = len(model.blocks)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            torch.nn.init.zeros_(p)
        elif p.dim() >= 2:
            std = 0.02 / (2 * n_layers) ** 0.5 if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
            torch.nn.init.normal_(p, mean=0.0, std=std)
    return model
