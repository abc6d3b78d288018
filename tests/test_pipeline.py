"""The analysis pipeline: one cached pass feeds every registered analysis; a metric is one file + one line."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest
import torch

import analysis.registry
from analysis.engine.cache import run_with_cache
from analysis.engine.pair_runs import N_PAIRS
from analysis.html_report import run_data
from analysis.metrics.dla import head_logit_contributions
from analysis.pipeline import HeadAnalysis
from storage.rundir import RunDir
from tests.conftest import untrained_calculator

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small():
    """An untrained 2-layer model on 2-digit addition and 300 test problems: the pipeline's shape, fast."""
    return untrained_calculator(n_layers=2)


def documented_metric(monkeypatch) -> tuple[types.ModuleType, str]:
    """docs/architecture.md's "Add a metric" example, as a module, and its registration line."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc[doc.index("## Add a metric") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    line = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    module = types.ModuleType("analysis.metrics.entropy")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # as if it were analysis/metrics/entropy.py
    exec(compile(code, "docs/architecture.md", "exec"), module.__dict__)
    return module, line.strip()


def test_the_documented_metric_reaches_the_run_directory_and_the_page(small, tmp_path, monkeypatch):
    module, test = small
    example, line = documented_metric(monkeypatch)
    assert line == '"entropy:AttentionEntropy",'  # the registry's own form: "<file>:<class>"
    metric = example.AttentionEntropy()
    monkeypatch.setattr(analysis.registry, "ANALYSES", [*analysis.registry.ANALYSES, metric])
    run = RunDir(tmp_path)
    HeadAnalysis(n_problems=200).run(module, test, run)

    rows = run.table("entropy").read_text().splitlines()
    assert rows[0] == "layer,head,entropy" and len(rows) == 1 + 2 * 4
    # the numbers are the entropy of the answer queries' attention, computed here another way
    cache = run_with_cache(module.net, test[:200, :-1])
    P, A = module.fmt.prompt_len, module.fmt.answer_len
    pattern = cache["blocks.1.attn.hook_pattern"][:, 2, P - 1 : P - 1 + A]  # layer 1, head 2: (N, A, T)
    want = torch.distributions.Categorical(probs=pattern).entropy().mean()
    assert float(rows[1 + 4 + 2].split(",")[2]) == pytest.approx(want.item(), rel=1e-4)

    facts = json.loads(run.analysis.read_text())
    described = next(a for a in facts["analyses"] if a["name"] == "entropy")
    assert described["view"] == "heads" and described["value"] == "entropy"
    assert described["columns"][2] == {"key": "entropy", "label": "entropy", "unit": "nats"}
    run.write_results({"status": "ok", "data": module.fmt.to_dict()})
    page = run_data(run.path)
    section = next(a for a in page["analyses"] if a["name"] == "entropy")
    assert len(section["rows"]) == 8 and section["title"] == "Attention entropy"


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
    for registered in analysis.registry.ANALYSES:
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
