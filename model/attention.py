"""Causal multi-head attention, written the way the course's lessons name it (``W_q``, ``W_k``, ``W_v``, ``W_o``,
``n_heads``, ``head_dim = d_model // n_heads``):

    Q, K, V = W_q(x), W_k(x), W_v(x)             project: all heads at once
    split into heads                              (B, T, d_model) -> (B, n_heads, T, head_dim)
    weights = softmax(Q Kᵀ / √head_dim + mask)    one T x T table per head
    z = weights · V                               each head's output
    out = W_o(concat(z))                          mix the heads back into d_model

The middle three lines run as the lesson's own steps (``attention_weights``) whenever someone reads the weights,
else as PyTorch's fused ``scaled_dot_product_attention``: the same result. Analysis code reads or replaces values
at two hook points named as in TransformerLens (``model/hooks.py``): ``hook_pattern`` (the weights; a hook on it
switches to the explicit path) and ``hook_z`` (each head's output before ``W_o``). Positions are not the block's
business: a position scheme may hand it one ``scores`` term (queries rescaled, a bias on the scores). Every step,
with its shape:
``python -m model.walkthrough``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from data.checks import check_whole
from model.hooks import HookPoint


@dataclass
class KVCache:
    """Keys and values of the positions seen so far, one per layer, for incremental decoding. They live in buffers
    with room to spare, doubled when full: a 1,000-token answer copies each key a few times, not once per token."""

    keys: torch.Tensor | None = None  # (B, n_kv_heads, room, head_dim): positions :length hold the keys
    values: torch.Tensor | None = None
    length: int = 0
    k = property(lambda self: None if self.keys is None else self.keys[..., : self.length, :])  # the keys held
    v = property(lambda self: None if self.values is None else self.values[..., : self.length, :])

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + k.shape[-2]
        if self.keys is None or end > self.keys.shape[-2]:  # full: what is held moves into twice the room
            held = self.k, self.v
            self.keys, self.values = (x.new_empty(*x.shape[:-2], 2 * end, x.shape[-1]) for x in (k, v))
            if held[0] is not None:
                self.keys[..., : self.length, :], self.values[..., : self.length, :] = held
        self.keys[..., self.length : end, :], self.values[..., self.length : end, :] = k, v
        self.length = end
        return self.k, self.v


def check_head_sizes(d_model: int, n_heads: int, n_kv_heads: int | None = None, dropout: float = 0.0) -> None:
    """The attention block's size rules, as ValueErrors that say what to choose instead."""
    sizes = {"d_model": d_model, "n_heads": n_heads, "n_kv_heads": n_heads if n_kv_heads is None else n_kv_heads}
    for name, value in sizes.items():
        check_whole(name, value)
    for part, whole in (("n_heads", "d_model"), ("n_kv_heads", "n_heads")):
        if sizes[whole] % sizes[part]:
            divisors = [h for h in range(1, sizes[whole] + 1) if sizes[whole] % h == 0]
            raise ValueError(f"{part}={sizes[part]} does not divide {whole}={sizes[whole]}; choose one of {divisors}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout={dropout!r}: must be a number in [0, 1)")


class MultiHeadAttention(nn.Module):
    """Multi-head attention over a residual stream d_model wide, with n_heads query heads. n_kv_heads: key/value
    heads; None = n_heads (plain multi-head attention), fewer is grouped-query attention, 1 multi-query attention:
    query head i reads key/value head i // group_size. dropout: on the attention weights (training only). bias: the
    four projections carry one. causal: mask future positions in self-attention (not in cross-attention)."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, dropout=0.0, bias=True, causal=True):
        super().__init__()
        check_head_sizes(d_model, n_heads, n_kv_heads, dropout)
        self.d_model, self.n_heads = d_model, n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.head_dim = d_model // n_heads
        self.group_size = n_heads // self.n_kv_heads  # query heads sharing one key/value head
        self.causal, self.dropout = causal, dropout
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=bias)
        self.W_k = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.W_v = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=bias)
        self.hook_pattern = HookPoint()  # (B, n_heads, T_q, T_k)
        self.hook_z = HookPoint()  # (B, T_q, n_heads, head_dim)

    def split_heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """(B, T, n * head_dim) -> (B, n, T, head_dim): view the width as heads, then move heads forward."""
        B, T, _ = x.shape
        return x.view(B, T, n, self.head_dim).transpose(1, 2)

    def forward(self, x, context=None, mask=None, need_weights=False, cache=None, scores=None):
        """Attend from ``x`` (B, T_q, d_model) to itself, or to ``context`` (B, T_k, d_model).
        mask: boolean, True = may attend, broadcastable to (B, n_heads, T_q, T_k); combined with the causal mask.
        need_weights: also return the weights (B, n_heads, T_q, T_k); else ``(out, None)``, out (B, T_q, d_model).
        cache: a :class:`KVCache` for incremental decoding; it takes the new keys and values, x the new positions.
        scores: what a position scheme adds, or None: called on the queries (B, n_heads, T_q, head_dim), it gives
            them back (perhaps rescaled) and a float bias added to Q Kᵀ / √head_dim, broadcastable to
            (B, n_heads, T_q, T_k), -inf hiding a key (or None).
        """
        B, T_q, _ = x.shape
        if cache is not None and context is not None:
            raise ValueError("cache is for self-attention decoding; cross-attention keys come from context")
        source = x if context is None else context
        q = self.split_heads(self.W_q(x), self.n_heads)  # (B, n_heads, T_q, head_dim)
        k = self.split_heads(self.W_k(source), self.n_kv_heads)  # (B, n_kv_heads, T_k, head_dim)
        v = self.split_heads(self.W_v(source), self.n_kv_heads)
        if cache is not None:
            k, v = cache.append(k, v)
        if self.group_size > 1:  # grouped-query: query head i reads key/value head i // group_size
            k = k.repeat_interleave(self.group_size, dim=1)  # (B, n_heads, T_k, head_dim)
            v = v.repeat_interleave(self.group_size, dim=1)
        bias = None
        if scores is not None:  # a position scheme's term: e.g. every head's query t times its factor, place scores
            q, bias = scores(q)
        causal = self.causal and context is None
        if need_weights or self.hook_pattern.has_hooks:
            allowed = self.allowed(T_q, k.shape[-2], causal, mask)
            weights = self.hook_pattern(self.attention_weights(q, k, allowed, bias))
            z = F.dropout(weights, self.dropout, self.training) @ v  # (B, n_heads, T_q, head_dim)
        else:
            weights = None
            z = self.fused_attention(q, k, v, causal, mask, bias)
        z = self.hook_z(z.transpose(1, 2))  # (B, T_q, n_heads, head_dim)
        out = self.W_o(z.reshape(B, T_q, self.n_heads * self.head_dim))  # concatenate the heads, then mix
        return out, (weights if need_weights else None)

    def allowed(self, T_q: int, T_k: int, causal: bool, mask: torch.Tensor | None) -> torch.Tensor | None:
        """Which keys each query may see, (T_q, T_k) or broadcastable; None = all. With a cache, query t sits at
        absolute position T_k - T_q + t and may see keys up to and including itself."""
        if not causal:
            return mask
        future_ok = torch.ones(T_q, T_k, dtype=torch.bool, device=self.W_q.weight.device).tril(diagonal=T_k - T_q)
        return future_ok if mask is None else mask & future_ok

    def attention_weights(self, q, k, allowed: torch.Tensor | None, bias: torch.Tensor | None = None) -> torch.Tensor:
        """The lesson's steps: scaled scores, the mask, softmax over the keys -> (B, n_heads, T_q, T_k)."""
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores if bias is None else scores + bias  # a position scheme's scores
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        return scores.softmax(dim=-1).nan_to_num(0.0)  # a query allowed no key at all gets zeros, not NaN

    def fused_attention(self, q, k, v, causal: bool, mask: torch.Tensor | None, bias=None) -> torch.Tensor:
        """The same as ``attention_weights(...) @ v`` in one fused kernel (weights never materialised)."""
        T_q, T_k = q.shape[-2], k.shape[-2]
        own_triangle = causal and mask is None and bias is None and T_q == T_k  # the kernel's is_causal: our mask
        allowed = None if own_triangle else self.allowed(T_q, T_k, causal, mask)
        if bias is not None:  # one float mask in the queries' dtype (bf16 under autocast): scores, -inf where hidden
            bias = bias.to(q.dtype)
            allowed = bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))
        dropout_p = self.dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, allowed, dropout_p, is_causal=own_triangle and T_q > 1)
