"""The lesson's multi-head attention, one step at a time: ``python -m model.walkthrough``.

Every step is computed here by hand from a real block's weights and printed with its shape; at the end the
result is compared with the block's own ``forward``, so what is printed is what the block does.
"""

from __future__ import annotations

import math

import torch

from model.attention import MultiHeadAttention


def walkthrough(B: int = 2, T: int = 5, d_model: int = 64, n_heads: int = 4) -> None:
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
    show("z.transpose(1, 2)", z, "(batch, tokens, heads, head_dim): what hook_z sees")
    concat = z.reshape(B, T, h * hd)
    show("z.reshape(B, T, n_heads * head_dim)", concat, "the heads side by side")

    print("9. W_o: mix the heads back into d_model")
    out = attn.W_o(concat)
    show("out = W_o(concat)", out, "every output feature reads every head")

    expected, expected_weights = attn(x, need_weights=True)
    diff = max((out - expected).abs().max().item(), (weights - expected_weights).abs().max().item())
    print(f"by hand vs attn(x, need_weights=True): max |difference| = {diff:.1e}")

    d = d_model
    counts = {
        n: sum(p.numel() for p in MultiHeadAttention(d, n).parameters())
        for n in sorted({1, 2, 4, 8, 16, h})
        if d % n == 0
    }
    print(f"parameters: W_q, W_k, W_v, W_o are {d}x{d} + {d} bias each: 4·d² + 4·d = {4 * d * d + 4 * d}")
    print("counted:    " + ", ".join(f"n_heads={n}: {c}" for n, c in counts.items()))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m model.walkthrough", description="Walk through one multi-head attention block, printing shapes."
    )
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=5)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    args = parser.parse_args()
    if min(args.batch, args.tokens) < 1:
        parser.error("--batch and --tokens must be >= 1")
    try:
        walkthrough(args.batch, args.tokens, args.d_model, args.heads)
    except ValueError as e:
        parser.error(str(e))
