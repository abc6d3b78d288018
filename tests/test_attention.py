"""The attention block against the lessons' definitions and against PyTorch's own implementation."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from model.attention import KVCache, MultiHeadAttention
from model.hooks import HookPoint, hooks

torch.manual_seed(0)


def by_hand(attn: MultiHeadAttention, x: torch.Tensor, context=None, causal=True) -> torch.Tensor:
    """Per-head loops straight from the formula: head_i = softmax(Q_i K_iᵀ / √d_k) V_i, then W_o(concat)."""
    src = x if context is None else context
    hd, group = attn.head_dim, attn.group_size
    Q, K, V = attn.W_q(x), attn.W_k(src), attn.W_v(src)
    heads = []
    for i in range(attn.n_heads):
        kv = i // group  # grouped-query: query head i reads key/value head i // group
        q = Q[..., i * hd : (i + 1) * hd]
        k = K[..., kv * hd : (kv + 1) * hd]
        v = V[..., kv * hd : (kv + 1) * hd]
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        if causal and context is None:
            T = x.shape[1]
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        heads.append(scores.softmax(-1) @ v)
    return attn.W_o(torch.cat(heads, dim=-1))


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8, 16])
def test_output_and_weight_shapes(n_heads):
    attn = MultiHeadAttention(64, n_heads)
    out, weights = attn(torch.randn(3, 7, 64), need_weights=True)
    assert out.shape == (3, 7, 64)
    assert weights.shape == (3, n_heads, 7, 7)
    assert attn.head_dim == 64 // n_heads
    assert attn(torch.randn(3, 7, 64))[1] is None  # no weights unless asked


@pytest.mark.parametrize("d_model", [16, 64, 96])
@pytest.mark.parametrize("n_heads", [1, 2, 4, 8, 16])
def test_parameter_count_does_not_depend_on_head_count(d_model, n_heads):
    if d_model % n_heads:
        pytest.skip("needs n_heads dividing d_model: this pair is not a valid model")
    attn = MultiHeadAttention(d_model, n_heads)
    assert sum(p.numel() for p in attn.parameters()) == 4 * d_model**2 + 4 * d_model


@pytest.mark.parametrize("need_weights", [False, True])
def test_causal_no_output_depends_on_a_later_token(need_weights):
    attn = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 9, 32)
    changed = x.clone()
    changed[:, 5:] = torch.randn(2, 4, 32)  # rewrite the future from position 5 on
    before, _ = attn(x, need_weights=need_weights)
    after, _ = attn(changed, need_weights=need_weights)
    torch.testing.assert_close(before[:, :5], after[:, :5])
    assert not torch.allclose(before[:, 5:], after[:, 5:])


def test_weights_are_causal_distributions():
    _, w = MultiHeadAttention(32, 4)(torch.randn(2, 6, 32), need_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 6))
    assert (w.triu(1) == 0).all()


@pytest.mark.parametrize("n_heads,n_kv_heads", [(4, None), (4, 2), (4, 1), (8, 2)])
def test_fast_path_equals_explicit_path_and_the_formula(n_heads, n_kv_heads):
    attn = MultiHeadAttention(64, n_heads, n_kv_heads).eval()
    x = torch.randn(2, 11, 64)
    fast, _ = attn(x)
    explicit, _ = attn(x, need_weights=True)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast, by_hand(attn, x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_grouped_and_multi_query_attention_share_key_value_heads(n_kv_heads):
    attn = MultiHeadAttention(64, 8, n_kv_heads)
    assert attn.W_k.out_features == attn.W_v.out_features == n_kv_heads * 8
    assert attn.W_q.out_features == 64
    x = torch.randn(1, 5, 64)
    seen = {}
    with hooks(attn, {"hook_z": lambda z: seen.update(z=z)}):
        _, w = attn(x, need_weights=True)
    assert w.shape == (1, 8, 5, 5)
    # the query heads of one group read the same values: head i's output is its pattern times V of group i // size
    V, hd = attn.W_v(x), attn.head_dim
    for i in range(8):
        kv = i // attn.group_size
        torch.testing.assert_close(seen["z"][:, :, i], w[:, i] @ V[..., kv * hd : (kv + 1) * hd])
    # and within a group the heads still differ (their queries differ): the sharing is of K and V only
    assert attn.group_size == 8 // n_kv_heads and not torch.allclose(w[:, 0], w[:, 1])
    n_params = sum(p.numel() for p in attn.parameters())
    assert n_params == 2 * (64 * 64 + 64) + 2 * (64 * n_kv_heads * 8 + n_kv_heads * 8)


def test_matches_torch_multihead_attention_given_the_same_weights():
    d, h, T = 64, 4, 10
    ours = MultiHeadAttention(d, h).eval()
    theirs = nn.MultiheadAttention(d, h, batch_first=True).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
        theirs.out_proj.weight.copy_(ours.W_o.weight)
        theirs.out_proj.bias.copy_(ours.W_o.bias)
    x = torch.randn(2, T, d)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)  # torch: True = may NOT attend
    expected, expected_w = theirs(x, x, x, attn_mask=future, average_attn_weights=False)
    out, w = ours(x, need_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, expected_w, atol=1e-5, rtol=1e-5)


def test_cross_attention_reads_the_context_without_a_causal_mask():
    attn = MultiHeadAttention(32, 4).eval()
    x, ctx = torch.randn(2, 3, 32), torch.randn(2, 8, 32)
    out, w = attn(x, context=ctx, need_weights=True)
    assert out.shape == (2, 3, 32) and w.shape == (2, 4, 3, 8)
    assert (w > 0).all()  # every query sees every context position
    torch.testing.assert_close(out, by_hand(attn, x, context=ctx), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(attn(x, context=ctx)[0], out, atol=1e-5, rtol=1e-5)


def test_boolean_mask_is_combined_with_the_causal_mask():
    attn = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 6, 32)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[0, ..., 0] = False  # sequence 0 may not look at position 0 (e.g. padding)
    out, w = attn(x, mask=mask, need_weights=True)
    assert (w[0, :, 1:, 0] == 0).all() and (w[1, :, :, 0] > 0).all()
    assert (w[:, :, 1:].triu(2) == 0).all()  # still causal (row 0 of sequence 0 sees nothing at all)
    fast, _ = attn(x, mask=mask)
    torch.testing.assert_close(fast[:, 1:], out[:, 1:], atol=1e-5, rtol=1e-5)


def test_zeroing_a_head_at_hook_z_is_zeroing_its_columns_of_w_o():
    attn = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 5, 32)
    seen = {}

    def zero_head_1(z):  # z: (B, T, n_heads, head_dim)
        z = z.clone()
        z[:, :, 1] = 0
        seen["z"] = z
        return z

    with hooks(attn, {"hook_z": zero_head_1}):
        out, _ = attn(x)
    assert (seen["z"][:, :, 1] == 0).all() and (seen["z"][:, :, 0] != 0).any()
    # what W_o receives for head 1 is zero: the same as zeroing W_o's columns for that head
    manual = MultiHeadAttention(32, 4).eval()
    manual.load_state_dict(attn.state_dict())
    with torch.no_grad():
        manual.W_o.weight[:, 8:16] = 0
    torch.testing.assert_close(out, manual(x)[0], atol=1e-6, rtol=1e-5)
    assert not torch.allclose(out, attn(x)[0])  # and the hook is gone: the intact block differs


def test_kv_cache_decoding_equals_full_recompute():
    attn = MultiHeadAttention(32, 4, n_kv_heads=2).eval()
    x = torch.randn(2, 7, 32)
    full, _ = attn(x)
    cache = KVCache()
    steps = [attn(x[:, :4], cache=cache)[0]] + [attn(x[:, t : t + 1], cache=cache)[0] for t in range(4, 7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 7


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(d_model=64, n_heads=3), "n_heads=3"),
        (dict(d_model=64, n_heads=4, n_kv_heads=3), "n_kv_heads=3"),
        (dict(d_model=0, n_heads=1), "d_model"),
        (dict(d_model=64, n_heads=0), "n_heads"),
        (dict(d_model=64, n_heads=4, n_kv_heads=0), "n_kv_heads"),
        (dict(d_model=64, n_heads=4, dropout=1.0), "dropout"),
    ],
)
def test_bad_sizes_raise_a_clear_value_error(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        MultiHeadAttention(**kwargs)


def test_a_hook_on_hook_pattern_reads_the_weights_on_every_call_and_leaves_no_trace():
    attn = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 6, 32)
    fused, _ = attn(x)
    assert isinstance(attn.hook_pattern, HookPoint) and not attn.hook_pattern.has_hooks
    seen = []
    with hooks(attn, {"hook_pattern": seen.append}):  # append returns None: the weights pass unchanged
        assert attn.hook_pattern.has_hooks
        out, weights = attn(x)  # no need_weights: the hook alone switches the block to the explicit path
    assert weights is None and len(seen) == 1 and seen[0].shape == (2, 4, 6, 6)
    torch.testing.assert_close(seen[0], attn(x, need_weights=True)[1])
    torch.testing.assert_close(out, fused, atol=1e-5, rtol=1e-5)
    assert not attn.hook_pattern.has_hooks and attn(x)[0] is not None and len(seen) == 1  # the hook is gone
    # a hook that returns a tensor replaces the weights: uniform attention over the visible keys
    uniform = torch.ones(6, 6).tril() / torch.arange(1, 7)[:, None]
    with hooks(attn, {"hook_pattern": lambda w: uniform.expand_as(w)}):
        replaced, _ = attn(x)
    V = attn.split_heads(attn.W_v(x), 4)  # (B, n_heads, T, head_dim)
    torch.testing.assert_close(replaced, attn.W_o((uniform @ V).transpose(1, 2).reshape(2, 6, 32)))


def test_a_hook_point_keeps_its_hooks_until_their_handles_are_removed():
    point = HookPoint()
    double, watch = point.add_hook(lambda x: 2 * x), point.add_hook(lambda x: None)
    assert point.has_hooks and torch.equal(point(torch.ones(3)), torch.full((3,), 2.0))
    double.remove()
    assert point.has_hooks and torch.equal(point(torch.ones(3)), torch.ones(3))
    watch.remove()
    assert not point.has_hooks


def test_a_scores_term_may_rescale_every_query_before_the_scores():
    attn = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 6, 32)
    scale = torch.linspace(0.5, 2.0, 6)[:, None]  # (T_q, 1)
    query_scale = lambda q: (q * scale, None)  # noqa: E731  (a position scheme's term: queries, no bias)
    _, scaled = attn(x, need_weights=True, scores=query_scale)
    handle = attn.W_q.register_forward_hook(lambda m, i, q: q * scale)  # the same, on the projection
    _, by_hand = attn(x, need_weights=True)
    handle.remove()
    torch.testing.assert_close(scaled, by_hand)
    torch.testing.assert_close(attn(x, scores=query_scale)[0], attn(x, need_weights=True, scores=query_scale)[0])


def test_a_scores_terms_float_bias_is_added_to_the_scores_and_minus_infinity_hides_a_key():
    attn = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 6, 32)
    bias = torch.randn(4, 6, 6)  # (n_heads, T_q, T_k)
    bias[:, 4, 1] = float("-inf")  # query 4 may not see key 1
    scores_bias = lambda q: (q, bias)  # noqa: E731  (a position scheme's term: the queries as they are, a bias)
    out, w = attn(x, need_weights=True, scores=scores_bias)
    assert (w[:, :, 4, 1] == 0).all() and (w[:, :, 4, [0, 2, 3, 4]] > 0).all() and (w.triu(1) == 0).all()
    q, k = attn.split_heads(attn.W_q(x), 4), attn.split_heads(attn.W_k(x), 4)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim) + bias).masked_fill(
        torch.ones(6, 6).triu(1) > 0, -math.inf
    )
    torch.testing.assert_close(w, scores.softmax(-1))
    torch.testing.assert_close(attn(x, scores=scores_bias)[0], out, atol=1e-5, rtol=1e-5)  # fused = explicit
