"""Causal multi-head attention, written the way the course's lessons name it.

    Q, K, V = W_q(x), W_k(x), W_v(x)             project: all heads at once
    split into heads                              (B, T, d_model) -> (B, n_heads, T, head_dim)
    weights = softmax(Q Kᵀ / √head_dim + mask)    one T x T table per head
    z = weights · V                               each head's output
    out = W_o(concat(z))                          mix the heads back into d_model

Two ways to compute the middle three lines, with the same result: the lesson's own steps (``attend``, used
whenever someone needs the weights) and PyTorch's fused ``F.scaled_dot_product_attention`` (training).
Names follow the lessons: ``W_q``, ``W_k``, ``W_v``, ``W_o``, ``n_heads``, ``head_dim = d_model // n_heads``.
Two hook points, named and shaped as in TransformerLens, let analysis code read or replace values (ablation
and patching go through them only: see ``model/hooks.py``):
  * ``hook_pattern`` -- the attention weights ``(B, n_heads, T_q, T_k)``; registering a hook on it switches
                        the block to the explicit path, so it fires on every call;
  * ``hook_z``       -- every head's output ``(B, T_q, n_heads, head_dim)``, before ``W_o`` mixes the heads.

``python -m model.walkthrough`` prints every step with its shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class KVCache:
    """Keys and values of the positions seen so far, one per layer, for incremental decoding."""

    k: torch.Tensor | None = None  # (B, n_kv_heads, T_past, head_dim)
    v: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=-2)
        return self.k, self.v


def check_size(name: str, value: int) -> None:
    """ValueError unless ``value`` is a whole number >= 1."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")


def check_log_scale(log_scale: int) -> None:
    """The length-scaled attention rule (``MultiHeadAttention``'s ``log_scale``), as a ValueError."""
    if isinstance(log_scale, bool) or not isinstance(log_scale, int) or log_scale < 0 or log_scale == 1:
        raise ValueError(f"log_scale={log_scale!r}: must be 0 (off) or a whole number >= 2")


def check_head_sizes(d_model: int, n_heads: int, n_kv_heads: int | None = None, dropout: float = 0.0) -> None:
    """The attention block's size rules, as ValueErrors that say what to choose instead."""
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
        check_size(name, value)
    if d_model % n_heads:
        divisors = [h for h in range(1, d_model + 1) if d_model % h == 0]
        raise ValueError(f"n_heads={n_heads} does not divide d_model={d_model}; choose one of {divisors}")
    if n_heads % n_kv_heads:
        divisors = [h for h in range(1, n_heads + 1) if n_heads % h == 0]
        raise ValueError(f"n_kv_heads={n_kv_heads} does not divide n_heads={n_heads}; choose one of {divisors}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout={dropout!r}: must be a number in [0, 1)")


class MultiHeadAttention(nn.Module):
    """Multi-head (optionally grouped-query) attention.

    Args:
        d_model: width of the residual stream.
        n_heads: number of query heads; ``head_dim = d_model // n_heads``.
        n_kv_heads: number of key/value heads. ``None`` = ``n_heads`` (plain multi-head attention);
            fewer is grouped-query attention, ``1`` is multi-query attention. Query head ``i`` reads
            key/value head ``i // (n_heads // n_kv_heads)``.
        dropout: dropout on the attention weights (training only).
        bias: whether the four projections carry a bias.
        causal: mask future positions in self-attention (ignored for cross-attention).
        log_scale: 0, or a base b: every query's scores are multiplied by log(n + 1) / log(b), n the keys it
            sees (scalable softmax), so attention stays as sharp over the many keys of a long sequence as over
            the few of a short one.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        causal: bool = True,
        log_scale: int = 0,
    ):
        super().__init__()
        check_head_sizes(d_model, n_heads, n_kv_heads, dropout)
        check_log_scale(log_scale)
        self.d_model, self.n_heads = d_model, n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.head_dim = d_model // n_heads
        self.group_size = n_heads // self.n_kv_heads  # query heads sharing one key/value head
        self.causal, self.dropout, self.log_scale = causal, dropout, log_scale

        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=bias)
        self.W_k = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.W_v = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=bias)

        self.hook_pattern = nn.Identity()  # (B, n_heads, T_q, T_k)
        self.hook_z = nn.Identity()  # (B, T_q, n_heads, head_dim)

    def split_heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """(B, T, n * head_dim) -> (B, n, T, head_dim): view the width as heads, then move heads forward."""
        B, T, _ = x.shape
        return x.view(B, T, n, self.head_dim).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``x`` (B, T_q, d_model) to itself, or to ``context`` (B, T_k, d_model).

        Args:
            mask: boolean, True = may attend, broadcastable to (B, n_heads, T_q, T_k); combined with
                the causal mask.
            need_weights: also return the attention weights (B, n_heads, T_q, T_k).
            cache: a :class:`KVCache` for incremental self-attention decoding; the new keys and
                values are appended to it and ``x`` holds only the new positions.
            bias: float scores added to Q Kᵀ / √head_dim before the mask, broadcastable to
                (B, n_heads, T_q, T_k) (relative place scores: ``Transformer.place_score_table``).

        Returns:
            ``(out, weights)``: out is (B, T_q, d_model); weights is None unless ``need_weights``.
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

        causal = self.causal and context is None
        if self.log_scale:  # query t sees T_k - T_q + t + 1 keys when causal (a cache holds the earlier ones), else T_k
            T_k = k.shape[-2]
            seen = (
                torch.arange(T_k - T_q, T_k, device=q.device) + 1
                if causal
                else torch.full((T_q,), T_k, device=q.device)
            )
            factor = (seen + 1).log() / math.log(self.log_scale)  # (T_q,)
            q = q * factor.to(q.dtype)[:, None]  # every head's query t, (.., T_q, head_dim)
        if need_weights or self.hook_pattern._forward_hooks:
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

    def attention_weights(
        self, q: torch.Tensor, k: torch.Tensor, allowed: torch.Tensor | None, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The lesson's steps: scaled scores, the mask, softmax over the keys -> (B, n_heads, T_q, T_k)."""
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if bias is not None:
            scores = scores + bias
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
        return F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=allowed,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=own_triangle and T_q > 1,
        )
