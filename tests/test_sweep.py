"""Hydra multirun: one run per setting, a failing setting fails alone, and the summary compares them."""

from __future__ import annotations

import csv

from tests.conftest import run_sweep


def test_a_two_job_sweep_with_a_bad_value_writes_a_summary(tmp_path):
    done = run_sweep(tmp_path, "model.n_heads=3,2", "analysis=none")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "n_heads=3" in errors[0]

    with (tmp_path / "sweep_summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["run"] for r in rows] == ["model.n_heads=3", "model.n_heads=2"]
    bad, good = rows
    assert bad["status"].startswith("failed: model.n_heads=3") and bad["test_exact_match"] == ""
    assert good["status"] == "ok" and good["head_dim"] == "32"
    assert 0 <= float(good["test_exact_match"]) <= 1 and int(good["n_params"]) > 0
    assert good["steps_to_99"] == "" or int(good["steps_to_99"]) % 50 == 0  # measured at validation steps
    assert (tmp_path / "sweep_summary.png").stat().st_size > 10_000
    assert "model.n_heads=2" in (tmp_path / "sweep_summary.md").read_text()
    (second,) = tmp_path.glob("1_*")  # one directory per job, named by its number and overrides
    assert (second / "history.json").exists() and (second / "results.json").exists()


def test_seeds_are_averaged_per_setting_not_across_settings():
    from analysis.sweep import grouped_over_seeds

    def row(run, em, steps):
        return {
            "run": run,
            "status": "ok",
            "test_exact_match": em,
            "steps_to_99": steps,
            "train_seconds": 1.0,
            "prunable_fraction": None,
        }

    rows = [
        row("fmt=a seed=0", 1.0, 100),
        row("fmt=a seed=1", 0.5, 300),
        row("fmt=b seed=0", 0.2, None),
        row("fmt=b seed=1", 0.4, 500),
        row("fmt=c seed=0", 0.9, 200),
    ]
    groups = {g["setting"]: g for g in grouped_over_seeds(rows)}
    assert set(groups) == {"fmt=a", "fmt=b"}  # fmt=c ran one seed: nothing to average
    assert groups["fmt=a"]["test_exact_match"] == (0.75, 0.5, 1.0)
    assert groups["fmt=a"]["steps_to_99"] == (200, 100, 300)
    assert groups["fmt=b"]["steps_to_99"] == (500, 500, 500)  # a run that never reached 99% is left out
    assert groups["fmt=a"]["prunable_fraction"] is None


def test_why_multi_head_writes_its_comparison_and_verdict(tmp_path):
    done = run_sweep(tmp_path, "experiment=why_multi_head", "analysis.n_problems=100")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "why multiple heads?" in done.stdout and "1 head x 64 dims" in done.stdout
    assert "4 heads x 16 dims" in done.stdout and "Traceback" not in done.stderr
    assert (tmp_path / "why_multi_head.png").stat().st_size > 10_000
    verdict = (tmp_path / "why_multi_head.md").read_text()
    assert "distinct role(s) among its 2 heads" in verdict and "among its 8 heads" in verdict
