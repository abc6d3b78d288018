"""Hydra multirun: one run per setting, a failing setting fails alone, and the summary compares them."""

from __future__ import annotations

import csv
import subprocess
import sys

from tests.conftest import ROOT


def test_a_two_job_sweep_with_a_bad_value_writes_a_summary(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "-m", "model.n_heads=3,2", "data.digits=2",
         "data.val_fraction=0.05", "data.test_fraction=0.05", "data.n_val=200", "data.n_test=200",
         "trainer.max_steps=200", "trainer.val_check_interval=50", "analysis=none", "logger=none",
         f"hydra.sweep.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "n_heads=3" in errors[0]

    with (tmp_path / "sweep_summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["run"] for r in rows] == ["model.n_heads=3", "model.n_heads=2"]
    bad, good = rows
    assert bad["status"].startswith("failed: n_heads=3") and bad["test_exact_match"] == ""
    assert good["status"] == "ok" and good["head_dim"] == "32"
    assert 0 <= float(good["test_exact_match"]) <= 1 and int(good["n_params"]) > 0
    assert good["steps_to_99"] == "" or int(good["steps_to_99"]) % 50 == 0  # measured at validation steps
    assert (tmp_path / "sweep_summary.png").stat().st_size > 10_000
    assert "model.n_heads=2" in (tmp_path / "sweep_summary.md").read_text()
    (second,) = tmp_path.glob("1_*")  # one directory per job, named by its number and overrides
    assert (second / "history.json").exists() and (second / "results.json").exists()
