"""Causal multi-head attention, written the way the course's lessons name it.

One block, two paths that compute the same thing:
  * fast path      -- ``F.scaled_dot_product_attention`` (fused kernel), used when nobody asks for weights;
  * explicit path  -- ``softmax(Q Kᵀ / √head_dim) · V``, used when ``need_weights=True``.

Names follow the lessons: ``W_q``, ``W_k``, ``W_v``, ``W_o``, ``n_heads``, ``head_dim = d_model // n_heads``.
Two per-head access points, in TransformerLens' spirit, let analysis code read or replace values with
ordinary forward hooks:
  * ``hook_pattern`` -- the attention weights ``(B, n_heads, T_q, T_k)`` (explicit path only);
  * ``hook_z``       -- every head's output ``(B, n_heads, T_q, head_dim)``, before the heads are
                        concatenated and mixed by ``W_o``.

Run ``python -m model.attention`` for a walk-through that prints every tensor shape.
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
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")


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
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        causal: bool = True,
    ):
        super().__init__()
        check_head_sizes(d_model, n_heads, n_kv_heads, dropout)
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads

        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim = d_model // n_heads
        self.group_size = n_heads // n_kv_heads  # query heads sharing one key/value head
        self.causal = causal
        self.dropout = dropout

        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=bias)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=bias)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=bias)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=bias)

        self.hook_pattern = nn.Identity()  # (B, n_heads, T_q, T_k)
        self.hook_z = nn.Identity()  # (B, n_heads, T_q, head_dim)

    def _split_heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """(B, T, n * head_dim) -> (B, n, T, head_dim): view the width as heads, then move heads forward."""
        B, T, _ = x.shape
        return x.view(B, T, n, self.head_dim).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        head_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``x`` (B, T_q, d_model) to itself, or to ``context`` (B, T_k, d_model).

        Args:
            mask: boolean, True = may attend, broadcastable to (B, n_heads, T_q, T_k); combined with
                the causal mask.
            need_weights: also return the attention weights (B, n_heads, T_q, T_k).
            head_mask: (n_heads,) or (B, n_heads); multiplies each head's output before ``W_o``
                (1 keeps a head, 0 ablates it).
            cache: a :class:`KVCache` for incremental self-attention decoding; the new keys and
                values are appended to it and ``x`` holds only the new positions.

        Returns:
            ``(out, weights)``: out is (B, T_q, d_model); weights is None unless ``need_weights``.
        """
        B, T_q, _ = x.shape
        if cache is not None and context is not None:
            raise ValueError("cache is for self-attention decoding; cross-attention keys come from context")
        source = x if context is None else context

        q = self._split_heads(self.W_q(x), self.n_heads)  # (B, n_heads, T_q, head_dim)
        k = self._split_heads(self.W_k(source), self.n_kv_heads)  # (B, n_kv_heads, T_k, head_dim)
        v = self._split_heads(self.W_v(source), self.n_kv_heads)
        if cache is not None:
            k, v = cache.append(k, v)
        if self.group_size > 1:  # grouped-query: query head i reads key/value head i // group_size
            k = k.repeat_interleave(self.group_size, dim=1)  # (B, n_heads, T_k, head_dim)
            v = v.repeat_interleave(self.group_size, dim=1)
        T_k = k.shape[-2]

        allowed = mask
        causal = self.causal and context is None
        if causal and (T_q > 1 or allowed is not None):
            # Query t (absolute position T_k - T_q + t) may see keys up to and including itself.
            future = torch.ones(T_q, T_k, dtype=torch.bool, device=x.device).tril(diagonal=T_k - T_q)
            allowed = future if allowed is None else allowed & future
        p_drop = self.dropout if self.training else 0.0

        if need_weights:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, n_heads, T_q, T_k)
            if allowed is not None:
                scores = scores.masked_fill(~allowed, float("-inf"))
            # a query allowed no key at all (e.g. a fully padded row) gets zero weights, not NaN
            weights = self.hook_pattern(scores.softmax(dim=-1).nan_to_num(0.0))
            z = F.dropout(weights, p_drop, self.training) @ v  # (B, n_heads, T_q, head_dim)
        else:
            weights = None
            fused_causal = causal and mask is None and T_q == T_k  # the kernel's own triangle suffices
            z = F.scaled_dot_product_attention(
                q, k, v,
                attn_mask=None if fused_causal else allowed,
                dropout_p=p_drop,
                is_causal=fused_causal and T_q > 1,
            )

        if head_mask is not None:
            # (n_heads,) or (B, n_heads) -> broadcast over positions and head_dim
            z = z * head_mask.to(z.dtype).reshape(*head_mask.shape, 1, 1)
        z = self.hook_z(z)

        # Concatenate heads: (B, n_heads, T_q, head_dim) -> (B, T_q, n_heads * head_dim), then mix with W_o.
        out = self.W_o(z.transpose(1, 2).reshape(B, T_q, self.n_heads * self.head_dim))
        return out, weights


def _walkthrough(B: int = 2, T: int = 5, d_model: int = 64, n_heads: int = 4) -> None:
    """Print every step of the block on a small input, in the lessons' order, with each tensor's shape.

    Every step is computed here by hand from the block's own weights (nothing is just described), and the
    result is compared with ``forward`` at the end, so what is printed is what the block does.
    """
    torch.manual_seed(0)
    attn = MultiHeadAttention(d_model, n_heads).eval()
    h, hd = attn.n_heads, attn.head_dim
    x = torch.randn(B, T, d_model)

    def show(label: str, t: torch.Tensor, note: str = "") -> None:
        print(f"   {label:<37}  {str(tuple(t.shape)):<16}  {note}".rstrip())

    print(f"d_model={d_model}, n_heads={h}, head_dim = d_model // n_heads = {hd}   (the lessons call it d_k)")
    show("x", x, "(batch, tokens, d_model)")

    print("1. project: one d_model x d_model matrix each, all heads at once")
    Q, K, V = attn.W_q(x), attn.W_k(x), attn.W_v(x)
    show("Q = W_q(x)", Q)
    show("K = W_k(x)", K)
    show("V = W_v(x)", V)

    print("2. view: cut the last axis into (n_heads, head_dim) -- no data moves")
    Q, K, V = (t.view(B, T, h, hd) for t in (Q, K, V))
    show("Q.view(B, T, n_heads, head_dim)", Q, "same for K and V")

    print("3. transpose(1, 2): the heads become a batch axis")
    Q, K, V = (t.transpose(1, 2) for t in (Q, K, V))
    show("Q.transpose(1, 2)", Q, "(batch, heads, tokens, head_dim)")
    show("K.transpose(1, 2)", K)
    show("V.transpose(1, 2)", V)

    print("4. scores: every head compares its queries with its keys")
    show("K.transpose(-2, -1)", K.transpose(-2, -1), "(batch, heads, head_dim, tokens)")
    scores = Q @ K.transpose(-2, -1) / math.sqrt(hd)
    show("Q @ Kᵀ / √head_dim", scores, "one T x T table per head")

    print("5. causal mask: a token may not look at later tokens")
    future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    show("future = ones(T, T).triu(1)", future, "True above the diagonal")
    scores = scores.masked_fill(future, float("-inf"))
    show("scores.masked_fill(future, -inf)", scores, "broadcast over batch and heads")

    print("6. softmax over the keys")
    weights = scores.softmax(dim=-1)
    show("weights = scores.softmax(-1)", weights, "rows sum to 1; zero right of the diagonal")

    print("7. weights · V: each head's output")
    z = weights @ V
    show("z = weights @ V", z, "(batch, heads, tokens, head_dim)")

    print("8. transpose back and concatenate the heads")
    z = z.transpose(1, 2)
    show("z.transpose(1, 2)", z, "(batch, tokens, heads, head_dim)")
    concat = z.reshape(B, T, h * hd)
    show("z.reshape(B, T, n_heads * head_dim)", concat, "the heads side by side")

    print("9. W_o: mix the heads back into d_model")
    out = attn.W_o(concat)
    show("out = W_o(concat)", out, "every output feature reads every head")

    expected, expected_weights = attn(x, need_weights=True)
    diff = max((out - expected).abs().max().item(), (weights - expected_weights).abs().max().item())
    print(f"by hand vs attn(x, need_weights=True): max |difference| = {diff:.1e}")

    d = d_model
    counts = {n: sum(p.numel() for p in MultiHeadAttention(d, n).parameters())
              for n in sorted({1, 2, 4, 8, 16, h}) if d % n == 0}
    print(f"parameters: W_q, W_k, W_v, W_o are {d}x{d} + {d} bias each: 4·d² + 4·d = {4 * d * d + 4 * d}")
    print("counted:    " + ", ".join(f"n_heads={n}: {c}" for n, c in counts.items()))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m model.attention",
                                     description="Walk through one multi-head attention block, printing shapes.")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=5)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    args = parser.parse_args()
    if min(args.batch, args.tokens) < 1:
        parser.error("--batch and --tokens must be >= 1")
    try:
        _walkthrough(args.batch, args.tokens, args.d_model, args.heads)
    except ValueError as e:
        parser.error(str(e))
