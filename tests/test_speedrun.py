"""experiment=add10_speedrun end to end: from nothing to an adder verify.py passes, stopped by its validation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, run_train


@pytest.mark.slow
def test_add10_speedrun_trains_an_adder_that_verify_passes(tmp_path):
    done = run_train(tmp_path, "experiment=add10_speedrun", "seed=0", "logger=none")
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["steps"] < 1500  # stopped when done (275 steps measured), not at the ceiling
    assert results["test_exact_match"] >= 0.999 and results["phases"]["analysis"] < 1
    verdict = subprocess.run(
        [sys.executable, str(ROOT / "verify.py"), str(tmp_path), "--json"], cwd=ROOT, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert verdict.returncode == 0, verdict.stdout[-2000:] + verdict.stderr[-2000:]
    suites = json.loads(verdict.stdout)[str(tmp_path)]["suites"]
    assert suites["random pairs"]["right"] >= 9_900 and all(s["passed"] for s in suites.values())
