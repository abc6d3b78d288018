"""A multi-head attention block typed as the lesson writes it: the starting point of "Write your own block"
(docs/course.md). Check it, then train the calculator with it:

    python -m model.check examples/my_attention.py:MultiHeadAttention
    python train.py model.attention=examples/my_attention.py:MultiHeadAttention
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)  # 1. project: every head's queries at once
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)  # 9. mix the heads back together

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        B, T, _ = x.shape  # (batch, tokens, embed_dim)
        # 2-3. split: (B, T, embed_dim) -> (B, T, heads, head_dim) -> (B, heads, T, head_dim)
        Q = self.W_q(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        K = self.W_k(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        V = self.W_v(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.head_dim)  # 4. (B, heads, T, T)
        if mask is not None:  # 5. True where a token may not look (a later token)
            scores = scores.masked_fill(mask, float("-inf"))
        weights = F.softmax(scores, dim=-1)  # 6. each query's weights sum to 1 over the keys
        out = weights @ V  # 7. (B, heads, T, head_dim)
        out = out.transpose(1, 2).contiguous().view(B, T, -1)  # 8. concatenate the heads: (B, T, embed_dim)
        return self.W_o(out), weights
