"""A sweep's runs asked longer problems than they trained on, side by side: sweep_length.png, one curve per run
(named by what sets it apart), drawn when a multirun ends (analysis/hydra_callbacks.py)."""

from __future__ import annotations

from pathlib import Path

from analysis.record import save_figure
from storage.rundir import SweepDir


def record_length_sweep(sweep: SweepDir, rows: list[dict]) -> Path | None:
    """sweep_length.png from ``rows`` (analysis/sweep.py: summarise, in job order) and each job's results.json;
    None when no run has a length analysis."""
    curves, trained = {}, 0
    for row, job in zip(rows, sweep.jobs(), strict=True):
        results = job.read_results()
        by_operator = results.get("length_exact_match")
        if not isinstance(by_operator, dict):
            continue
        trained = max(trained, int(results.get("length_trained_digits") or 0))
        for op, curve in by_operator.items():
            label = row["run"] if len(by_operator) == 1 else f"{row['run']} '{op}'"
            curves[label] = {int(w): float(x) for w, x in curve.items()}
    if not curves:
        return None
    from analysis.length_figure import length_curves  # matplotlib only when there is something to draw

    return save_figure(length_curves(curves, trained), sweep.path / "sweep_length.png")
