"""The decoder-only transformer: causality end to end, generation with and without the KV cache."""

from __future__ import annotations

import copy
import re

import pytest
import torch

from analysis.engine.cache import run_with_cache
from data.positions import place_ids, shifted
from data.problems import ProblemFormat
from data.tokenizer import CharTokenizer
from model.attention import KVCache
from model.build import build_transformer, transformer_config
from model.hooks import HookPoint, hook_names, zero_ablated
from model.transformer import Transformer, TransformerConfig


def tiny(**kw) -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=17, block_size=16, d_model=32, n_heads=4, **kw)).eval()


def test_logits_and_per_layer_weights():
    model = tiny(n_layers=3)
    logits, weights = model(torch.randint(17, (2, 10)), need_weights=True)
    assert logits.shape == (2, 10, 17)
    assert len(weights) == 3 and all(w.shape == (2, 4, 10, 10) for w in weights)
    assert model(torch.randint(17, (2, 10)))[1] is None


@pytest.mark.parametrize("n_heads, n_kv_heads", [(1, None), (4, None), (8, 2)])
def test_the_config_head_dim_is_each_attention_heads_width(n_heads, n_kv_heads):
    model = Transformer(
        TransformerConfig(vocab_size=17, block_size=16, d_model=32, n_heads=n_heads, n_kv_heads=n_kv_heads)
    )
    assert model.cfg.head_dim == 32 // n_heads
    assert {block.attn.head_dim for block in model.blocks} == {model.cfg.head_dim}
    assert model.blocks[0].attn.W_q.out_features == n_heads * model.cfg.head_dim


def test_changing_a_future_token_changes_no_earlier_logit():
    model = tiny()
    idx = torch.randint(17, (1, 12))
    other = idx.clone()
    other[0, 8] = (other[0, 8] + 1) % 17
    a, _ = model(idx)
    b, _ = model(other)
    torch.testing.assert_close(a[:, :8], b[:, :8])
    assert not torch.allclose(a[:, 8:], b[:, 8:])


@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_cached_generation_equals_recomputing_the_whole_sequence(n_kv_heads):
    model = tiny(n_kv_heads=n_kv_heads)
    prompt = torch.randint(17, (5, 6))
    cached = model.generate(prompt, 8)
    plain = model.generate(prompt, 8, use_cache=False)
    assert torch.equal(cached, plain)
    # and each generated token is the argmax of a full forward pass over what came before
    seq = torch.cat([prompt, cached], dim=1)
    logits, _ = model(seq[:, :-1])
    assert torch.equal(logits[:, 5:].argmax(-1), cached)


@pytest.mark.parametrize("n_layers", [1, 3])
def test_logits_from_skips_earlier_positions_without_changing_the_rest(n_layers):
    model = tiny(n_layers=n_layers).train()
    idx = torch.randint(17, (3, 12))
    full, _ = model(idx)
    part, _ = model(idx, logits_from=7)
    assert part.shape == (3, 5, 17)
    torch.testing.assert_close(part, full[:, 7:])
    # earlier positions still learn: as keys and values of the later positions' queries
    part.sum().backward()
    assert (model.pos_emb.weight.grad[:7].abs().sum(dim=1) > 0).all()


def test_zero_ablated_switches_off_exactly_the_heads_named():
    model = tiny(n_layers=2).eval()
    idx = torch.randint(17, (2, 8))
    intact = model(idx)[0]
    with zero_ablated(model, []):
        torch.testing.assert_close(model(idx)[0], intact)
    with zero_ablated(model, [(1, 2)]):
        dropped = model(idx)[0]
    assert not torch.allclose(dropped, intact)
    with torch.no_grad():  # the same as zeroing layer 1's W_o columns of head 2 (head_dim 8)
        manual = copy.deepcopy(model)
        manual.blocks[1].attn.W_o.weight[:, 16:24] = 0
    torch.testing.assert_close(dropped, manual(idx)[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(model(idx)[0], intact)  # the hooks are removed on leaving


def test_run_with_cache_holds_every_hook_point_of_one_pass():
    model = tiny(n_layers=2).eval()
    idx = torch.randint(17, (5, 8))
    cache = run_with_cache(model, idx, batch_size=2)  # three chunks, stitched back together
    assert sorted(cache) == sorted(hook_names(model))
    torch.testing.assert_close(cache.logits, model(idx)[0])
    _, weights = model(idx, need_weights=True)
    torch.testing.assert_close(cache.stack("attn.hook_pattern"), torch.stack(weights))
    torch.testing.assert_close(cache["blocks.0.hook_resid_pre"], model.embed(idx))
    x, _ = model.run_blocks(cache["blocks.1.hook_resid_pre"], start_layer=1)  # the cache restarts the pass mid-way
    torch.testing.assert_close(model.unembed(x), cache.logits)
    torch.testing.assert_close(cache[1:3].logits, cache.logits[1:3])
    assert cache[1:3]["blocks.1.attn.hook_z"].shape == (2, 8, 4, 8)


def test_weight_tying_is_an_option():
    tied, untied = tiny(tie_weights=True), tiny(tie_weights=False)
    assert tied.lm_head.weight.data_ptr() == tied.tok_emb.weight.data_ptr()
    assert untied.n_params - tied.n_params == 17 * 32


def test_too_long_a_sequence_is_a_clear_error():
    with pytest.raises(ValueError, match="block_size=16"):
        tiny()(torch.zeros(1, 17, dtype=torch.long))


@pytest.mark.parametrize("bad", [dict(n_layers=0), dict(n_heads=3), dict(vocab_size=0)])
def test_config_validation(bad):
    kw = dict(vocab_size=17, block_size=16, d_model=32, n_heads=4) | bad
    with pytest.raises(ValueError):
        TransformerConfig(**kw)


def test_logits_from_with_a_kv_cache_is_a_clear_error():
    model = tiny()
    with pytest.raises(ValueError, match="logits_from"):
        model(torch.randint(17, (1, 4)), caches=[KVCache() for _ in model.blocks], logits_from=2)


# ---- every position scheme: the same checkpoint format, the same model on every path ----------------------------
FMT = ProblemFormat(3, "+")
PLACES = dict(place_embedding=True, position_embedding=False, place_offset=2)  # coupling, 2 places beyond
SCHEMES = {
    "default": {},
    "grouped-query": dict(n_kv_heads=2),
    "own places": dict(place_embedding=True, place_of="own", place_offset=2),
    "coupling": PLACES,
    "place scores": PLACES | dict(place_bias=2),
    "place window": PLACES | dict(place_bias=1, place_window=True),
    "log scale": dict(log_scale=2, n_kv_heads=2),
    "everything": PLACES | dict(place_bias=2, log_scale=20, position_embedding=True, place_of="own"),
}


def scheme_net(**kw) -> Transformer:
    """A seed-0 model of 3-digit sums with room for 5 digits; trained-looking (non-zero) place scores."""
    torch.manual_seed(0)
    vocab, block = CharTokenizer().vocab_size, FMT.at_width(5).seq_len
    net = build_transformer(transformer_config(vocab_size=vocab, block_size=block, d_model=32, n_heads=4, **kw), FMT)
    if kw.get("place_bias"):
        torch.nn.init.normal_(net.places.place_scores.weight, 0, 2)
    return net.eval()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_state_dict_keys_are_the_checkpoint_format(scheme):
    kw = SCHEMES[scheme]
    block = ["ln_attn.weight", "ln_attn.bias"] + [f"attn.W_{p}.{t}" for p in "qkvo" for t in ("weight", "bias")]
    block += ["ln_mlp.weight", "ln_mlp.bias"] + [f"mlp.fc_{p}.{t}" for p in ("in", "out") for t in ("weight", "bias")]
    positions = [key for key, on in [("pos_emb", kw.get("position_embedding", True)), ("places.place_emb",
        kw.get("place_embedding")), ("places.place_scores", kw.get("place_bias"))] if on]  # fmt: skip
    expected = ["tok_emb.weight", *(f"{name}.weight" for name in positions)]
    expected += [f"blocks.{i}.{key}" for i in range(2) for key in block] + [
        "ln_f.weight",
        "ln_f.bias",
        "lm_head.weight",
    ]
    net = scheme_net(**kw)
    assert list(net.state_dict()) == expected
    again = scheme_net(**kw)
    again.load_state_dict(net.state_dict())  # strict
    seq = torch.randint(10, (2, FMT.seq_len - 1))
    assert torch.equal(again(seq)[0], net(seq)[0])
    old = scheme_net(**kw)  # the keys of checkpoints saved while the place parameters sat on the Transformer
    old.load_state_dict({k.removeprefix("places."): v for k, v in net.state_dict().items()})  # strict
    assert torch.equal(old(seq)[0], net(seq)[0])


@pytest.mark.parametrize(
    "scheme, expected",
    [
        ("default", [0.23412, -0.00606, 0.470187, 0.030352]),
        ("place window", [0.147055, 0.018507, 0.329362, 0.048118]),
        ("log scale", [-0.071495, -0.052251, 0.549882, 0.107737]),
    ],
)
def test_a_seed_0_model_gives_the_logits_it_gave_before_the_position_schemes_moved(scheme, expected):
    """Recorded at 82c774e (before model/positions.py): the same initialisation and the same arithmetic."""
    net = scheme_net(**SCHEMES[scheme])
    seq = torch.arange(FMT.seq_len - 1)[None] % 10
    torch.testing.assert_close(net(seq)[0][0, -1, :4], torch.tensor(expected), atol=2e-6, rtol=0)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_fused_and_explicit_attention_give_the_same_logits_under_every_scheme(scheme):
    net = scheme_net(**SCHEMES[scheme])
    seq = torch.randint(10, (3, FMT.seq_len - 1))
    explicit, weights = net(seq, need_weights=True)
    torch.testing.assert_close(net(seq)[0], explicit, atol=1e-5, rtol=1e-5)
    assert all(torch.allclose(w.sum(-1), torch.ones(1)) for w in weights)
    if (
        net.cfg.places and net.cfg.places.place_embedding
    ):  # per-sequence places (training's shifted ones), and a longer problem's
        places = shifted(torch.tensor(place_ids(FMT, net.cfg.places.place_of)), torch.tensor([0, 1, 2]))
        torch.testing.assert_close(net(seq, places=places)[0], net(seq, need_weights=True, places=places)[0])
        wide = FMT.at_width(5)
        places, seq = torch.tensor(place_ids(wide, net.cfg.places.place_of)), torch.randint(10, (3, wide.seq_len - 1))
        torch.testing.assert_close(net(seq, places=places)[0], net(seq, need_weights=True, places=places)[0])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_decoding_with_the_kv_cache_equals_recomputing_under_every_scheme(scheme):
    net = scheme_net(**SCHEMES[scheme])
    seq = torch.randint(10, (3, FMT.seq_len - 1))
    caches = [KVCache() for _ in net.blocks]
    steps = [net(seq[:, :6], caches=caches)[0]] + [net(seq[:, t : t + 1], caches=caches)[0] for t in range(6, 13)]
    torch.testing.assert_close(torch.cat(steps, dim=1), net(seq)[0], atol=1e-5, rtol=1e-5)
    prompt = seq[:, : FMT.prompt_len]
    assert torch.equal(net.generate(prompt, FMT.answer_len), net.generate(prompt, FMT.answer_len, use_cache=False))


def test_every_hook_point_is_a_hook_point_and_none_is_left_hooked():
    model = tiny(n_layers=2)
    with zero_ablated(model, [(0, 1), (1, 2)]):
        assert [model.get_submodule(n).has_hooks for n in hook_names(model)] == [False, False, True] * 2 + [False]
    assert all(isinstance(model.get_submodule(n), HookPoint) for n in hook_names(model))
    assert not any(model.get_submodule(n).has_hooks for n in hook_names(model))


def test_the_worked_example_of_a_position_scheme_runs(monkeypatch):
    """docs/architecture.md "Add a position scheme": its file and its registration line, executed as written."""
    from model import build
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "architecture.md").read_text().split("## Add a position scheme", 1)[1].split("\n## ")[0]
    scheme_file, registration = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert registration.strip().startswith("SCHEMES[") and registration.count("\n") == 1  # one line
    namespace: dict = {}
    exec(compile(scheme_file, "model/sinusoidal.py", "exec"), namespace)
    monkeypatch.setattr(build, "SCHEMES", dict(build.SCHEMES))
    exec(registration, {**namespace, "SCHEMES": build.SCHEMES})
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=17, block_size=FMT.seq_len, d_model=32, places=namespace["SinusoidalConfig"]())
    net = build.build_transformer(cfg, FMT).eval()
    assert net.pos_emb is None and not any("table" in k for k in net.state_dict())  # nothing learned, nothing saved
    assert torch.equal(net.positions(0, 3), net.places.table[:3])
    prompt = torch.randint(10, (3, FMT.prompt_len))
    assert torch.equal(net.generate(prompt, 4, use_cache=True), net.generate(prompt, 4, use_cache=False))
    plain = build.build_transformer(TransformerConfig(vocab_size=17, block_size=FMT.seq_len, d_model=32), FMT)
    assert plain.pos_emb is not None  # without the scheme: the lesson's learned positions
