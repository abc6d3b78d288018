"""The analysis pipeline: one cached pass feeds every registered analysis, each computed once whatever the order.

(The docs' worked example of adding an analysis runs in tests/test_adding_an_analysis.py.)"""

from __future__ import annotations

import json
import random
import sys
import types

import pytest
import torch

import analysis.registry
from analysis.engine.cache import run_with_cache
from analysis.engine.pair_runs import N_PAIRS
from analysis.metric import UNITS, Column, Context, HeadMetric, Product
from analysis.metrics.dla import head_logit_contributions
from analysis.pipeline import HeadAnalysis
from data.arithmetic import DataConfig
from data.build import data_module
from storage.rundir import RunDir
from tests.conftest import untrained_calculator
from tests.test_calc import make_run
from training.load import load_module


@pytest.fixture(scope="module")
def small():
    """An untrained 2-layer model on 2-digit addition and 300 test problems: the pipeline's shape, fast."""
    return untrained_calculator(n_layers=2)


def test_one_forward_pass_feeds_every_analysis(small, tmp_path):
    """Maps, roles, ablation, pruning and direct logit attribution all read one cached pass: the network's forward
    runs once over the test problems (ablated scores restart mid-network from the cache, through run_blocks). Patching
    runs its own clean / corrupted pairs, never the test problems again."""
    module, test = small
    calls = []
    handle = module.net.register_forward_pre_hook(lambda _m, args: calls.append(args[0].shape))
    try:
        results = HeadAnalysis(n_problems=200).run(module, test, RunDir(tmp_path))
    finally:
        handle.remove()
    n_probes = len(HeadAnalysis().probes_for(module))
    assert calls[0] == torch.Size([n_probes + 200, module.fmt.seq_len - 1])
    assert all(shape[0] <= N_PAIRS for shape in calls[1:])  # pairs only
    pairs_based = {"patching", "circuit", "circuit_roles"}  # an untrained model tells no digit apart: none
    longer = {"length"}  # only for a model that can address longer problems than it trained on
    for registered in analysis.registry.analyses():
        assert RunDir(tmp_path).table(registered.name).is_file() is (registered.name not in pairs_based | longer)
    assert {"head_roles", "most_important_heads", "prunable_fraction", "direct_logit_attribution"} <= set(results)
    # an untrained model: its rows are recorded, but the summary claims no pruning or roles about it
    assert results["learned"] is False and results["intact_exact_match"] < results["learned_threshold"]
    [(label, text)] = results["analysis_summary"]
    assert label == "heads" and text.startswith("not learned") and "no pruning or role claims" in text


def test_direct_logit_attribution_adds_up_to_the_logit(small):
    """Every head's direct effect, plus the rest of the residual stream's and ln_f's bias, is exactly the right
    token's logit above the average logit (the LayerNorm scale read from the cache)."""
    module, test = small
    net, seqs = module.net, test[:50]
    with torch.no_grad():  # a model whose heads matter: random weights, larger output projections
        for block in net.blocks:
            block.attn.W_o.weight.normal_(0, 0.5)
    cache = run_with_cache(net, seqs[:, :-1])
    queries = list(range(module.fmt.prompt_len - 1, module.fmt.seq_len - 2))
    heads = head_logit_contributions(net, cache, seqs, queries)  # (L, H, N, Q)
    resid = cache["hook_resid_final"][:, queries]
    written = sum(
        torch.einsum("nqhe,dhe->nqd", cache.layer(i, "attn.hook_z")[:, queries], b.attn.W_o.weight.view(32, 4, 8))
        for i, b in enumerate(net.blocks)
    )
    rest = resid - written
    scale = (resid.var(-1, unbiased=False, keepdim=True) + net.ln_f.eps).sqrt()
    unembed, right = net.lm_head.weight, seqs[:, [q + 1 for q in queries]]
    direction = unembed[right] - unembed.mean(0)
    others = (((rest - rest.mean(-1, keepdim=True)) / scale) * net.ln_f.weight * direction).sum(-1)
    total = heads.sum(dim=(0, 1)) + others + (net.ln_f.bias * direction).sum(-1)
    logits = cache.logits[:, queries]
    want = logits.gather(-1, right[..., None])[..., 0] - logits.mean(-1)
    torch.testing.assert_close(total, want, atol=1e-4, rtol=1e-4)
    with torch.no_grad():  # a head that writes nothing has no direct effect, and the others keep theirs
        net.blocks[1].attn.W_o.weight.view(32, 4, 8)[:, 3] = 0
    again = head_logit_contributions(net, cache, seqs, queries)  # same cache: only W_o changed
    assert again[1, 3].abs().max() == 0 and torch.equal(again[0], heads[0])


@pytest.fixture(scope="module")
def adder(tmp_path_factory):
    """A 2-digit adder trained for 300 steps: it tells digits apart, so patching and circuits have pairs to study."""
    module, _ = load_module(make_run(tmp_path_factory.mktemp("adder"), "+", 300))
    test = data_module(DataConfig(digits=2, val_fraction=0.05, test_fraction=0.05, n_test=300)).held_out_set("test")
    return module.eval(), test


def recorded(module, test, run_dir, order: list) -> tuple[dict, dict, dict[str, str]]:
    """A pipeline run with the analyses registered in ``order``: results.json's entries (no timing, no paths),
    analysis.json's analyses by name, and every CSV's text."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(analysis.registry, "analyses", lambda: order)
        found = HeadAnalysis(n_problems=300, circuits=True).run(module, test, RunDir(run_dir))
    found = {k: v for k, v in found.items() if k not in ("analysis_seconds", "images", "analysis_summary")}
    facts = json.loads(RunDir(run_dir).analysis.read_text())
    return found, {a["name"]: a for a in facts["analyses"]}, {p.name: p.read_text() for p in run_dir.glob("*.csv")}


def test_the_registry_order_changes_no_result(adder, tmp_path):
    """What one analysis reads of another (pruning the ablation ranking, ablation the roles, the circuit roles the
    circuits) is computed on first request, so any order of the registry records the same numbers."""
    module, test = adder
    registered = list(analysis.registry.analyses())
    shuffled = random.Random(0).sample(registered, len(registered))
    assert shuffled != registered and shuffled != registered[::-1]
    want = recorded(module, test, tmp_path / "registered", registered)
    assert {"circuit.csv", "circuit_roles.csv", "patching.csv", "pruning.csv"} <= set(want[2])  # every dependency ran
    for name, order in (("reversed", registered[::-1]), ("shuffled", shuffled)):
        assert recorded(module, test, tmp_path / name, order) == want, name


class Counted(Product[int]):
    computed = 0

    def compute(self, ctx: Context) -> int:
        Counted.computed += 1
        return 41


class Declared(Product[int]):
    needs = (Counted,)

    def compute(self, ctx: Context) -> int:
        return ctx.result(Counted) + 1


class Undeclared(Product[int]):
    def compute(self, ctx: Context) -> int:
        return ctx.result(Counted) + 1


class Chicken(Product[int]):
    def compute(self, ctx: Context) -> int:
        return ctx.result(Egg)


class Egg(Product[int]):
    needs = (Chicken,)

    def compute(self, ctx: Context) -> int:
        return ctx.result(Chicken)


Chicken.needs = (Egg,)


def test_a_need_is_computed_once_and_must_be_declared():
    ctx = Context(None, None, None, None, tolerance=0.01)
    Counted.computed = 0
    assert ctx.result(Declared) == 42 and ctx.result(Counted) == 41 and ctx.result(Declared) == 42
    assert Counted.computed == 1  # computed on first request, then kept
    with pytest.raises(ValueError, match=r"Undeclared reads Counted undeclared: add it to Undeclared.needs"):
        Context(None, None, None, None, tolerance=0.01).result(Undeclared)
    with pytest.raises(ValueError, match=r"need each other: Chicken -> Egg -> Chicken"):
        Context(None, None, None, None, tolerance=0.01).result(Chicken)


def test_an_unknown_unit_is_an_error_naming_the_allowed_ones():
    """A user once gave a column the unit "share": the page drew it as white text on white cells. Now the class
    cannot even be defined."""
    with pytest.raises(ValueError) as error:

        class Shares(HeadMetric):
            columns = (Column("layer", "layer"), Column("head", "head"), Column("share", "share", "share"))
            value = "share"

    message = str(error.value)
    assert "'share'" in message and all(repr(unit) in message for unit in UNITS)
    assert set(UNITS) == {"fraction", "points", "logit", "nats", ""}


def test_registering_checks_what_the_page_will_read(monkeypatch):
    """A head metric whose heatmap value is no column, or a second analysis of a name, fails when registered."""

    class NoValue(HeadMetric):
        name = "novalue"
        columns = (Column("layer", "layer"), Column("head", "head"), Column("entropy", "entropy", "nats"))
        value = "entrpy"

    fake = types.ModuleType("analysis.metrics.fake")
    fake.NoValue = NoValue
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    shows = r"NoValue.value='entrpy': the column its heatmap shows, one of \['layer', 'head', 'entropy'\]"
    with pytest.raises(ValueError, match=shows):
        analysis.registry.registered(["fake:NoValue"])
    with pytest.raises(ValueError, match=r"dla:DirectLogitAttribution: another registered analysis is named 'dla'"):
        analysis.registry.registered(["dla:DirectLogitAttribution", "dla:DirectLogitAttribution"])
    assert [a.name for a in analysis.registry.registered(analysis.registry.REGISTERED)] == [
        a.name for a in analysis.registry.analyses()
    ]
