"""The docs' worked example of adding an analysis, executed: its one file and its one registration line reach the
run directory (the CSV, analysis.json) and the page."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
import torch

import analysis.registry
from analysis.engine.cache import run_with_cache
from analysis.html_report import run_data
from analysis.pipeline import HeadAnalysis
from storage.rundir import RunDir
from tests.conftest import untrained_calculator

ROOT = Path(__file__).resolve().parents[1]
DOC, SECTION = ROOT / "docs" / "architecture.md", "## Add a metric"  # where the worked example lives


def documented_example() -> tuple[str, str]:
    """The section's Python block (the analysis's one file) and its text block (the registration line)."""
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))  # the next section, if any
    section = text[start : None if end == -1 else end]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    line = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    return code, line.strip()


def test_the_documented_analysis_reaches_the_run_directory_and_the_page(tmp_path, monkeypatch):
    module, test = untrained_calculator(n_layers=2)
    code, line = documented_example()
    assert line == '"entropy:AttentionEntropy",'  # the registry's own form: "<file>:<class>"
    file = tmp_path / "entropy.py"  # as if it were analysis/metrics/entropy.py
    file.write_text(code)
    spec = importlib.util.spec_from_file_location("analysis.metrics.entropy", file)
    monkeypatch.setitem(sys.modules, spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(sys.modules[spec.name])
    entries = (*analysis.registry.REGISTERED, line.strip('",'))  # the registry with that one line added
    monkeypatch.setattr(analysis.registry, "analyses", lambda: analysis.registry.registered(entries))
    run = RunDir(tmp_path / "run")
    HeadAnalysis(n_problems=200).run(module, test, run)

    rows = run.table("entropy").read_text().splitlines()
    assert rows[0] == "layer,head,entropy" and len(rows) == 1 + 2 * 4
    entropy = float(rows[1 + 4 + 2].split(",")[2])  # layer 1, head 2
    # the numbers are the entropy of the answer queries' attention, computed here another way
    cache = run_with_cache(module.net, test[:200, :-1])
    P, A = module.fmt.prompt_len, module.fmt.answer_len
    pattern = cache["blocks.1.attn.hook_pattern"][:, 2, P - 1 : P - 1 + A]  # layer 1, head 2: (N, A, T)
    want = torch.distributions.Categorical(probs=pattern).entropy().mean()
    assert entropy == pytest.approx(want.item(), rel=1e-4)

    facts = json.loads(run.analysis.read_text())
    described = next(a for a in facts["analyses"] if a["name"] == "entropy")
    assert described["view"] == "heads" and described["value"] == "entropy"
    assert described["columns"][2] == {"key": "entropy", "label": "entropy", "unit": "nats"}
    assert described["notes"]["L1h2"] == f"{entropy:.2f} nats of attention entropy where it writes the answer"
    run.write_results({"status": "ok", "data": module.fmt.to_dict()})
    page = run_data(run.path)
    section = next(a for a in page["analyses"] if a["name"] == "entropy")
    assert len(section["rows"]) == 8 and section["title"] == "Attention entropy"
