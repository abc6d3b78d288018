"""The side-by-side comparison of a Hydra multirun's jobs (e.g. a sweep over head counts): read, aggregate, record.

Every job leaves results.json and history.json in its own directory; ``summarise`` reads them all into rows
(pure), and ``record_summary`` writes sweep_summary.csv, sweep_summary.md and sweep_summary.png through
:class:`SweepDir`, then logs the same table and image to wandb, in the sweep's group, when the sweep used the
wandb logger. The Hydra callback that runs it when a multirun ends is in analysis/hydra_callbacks.py.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from omegaconf import OmegaConf

from analysis.metric import MILESTONE
from analysis.record import record_sweep
from storage.rundir import RunDir, SweepDir

COLUMNS = [
    "run",
    "n_heads",
    "head_dim",
    "n_params",
    "attention_params",
    "steps_to_99",
    "test_exact_match",
    "train_seconds",
    "prunable_fraction",
    "status",
]


def steps_to(history: list[dict], target: float) -> int | None:
    """The first validation step whose exact-match reached ``target`` (None if none did)."""
    return next((h["step"] for h in history if h["exact_match"] >= target), None)


def read_job(job: RunDir) -> dict:
    """One row of the summary from a job directory (also for a job that failed or never finished)."""
    cfg = OmegaConf.load(job.hydra_config)
    overrides = OmegaConf.load(job.hydra_overrides)
    results = (
        json.loads(job.results.read_text())
        if job.results.exists()
        else {"status": "failed", "error": "no results.json"}
    )
    history = json.loads(job.history.read_text())["val"] if job.history.exists() else []
    n_heads, d_model = cfg.model.n_heads, cfg.model.d_model
    ok = results.get("status") == "ok"
    return {
        "overrides": list(overrides),
        "n_heads": n_heads,
        "head_dim": d_model // n_heads if isinstance(n_heads, int) and n_heads > 0 and d_model % n_heads == 0 else None,
        "n_params": results.get("n_params"),
        "attention_params": results.get("attention_params"),
        "steps_to_99": steps_to(history, MILESTONE),
        "test_exact_match": results.get("test_exact_match"),
        "train_seconds": results.get("train_seconds"),
        "prunable_fraction": results.get("prunable_fraction"),
        "status": "ok" if ok else f"failed: {results.get('error', 'unknown error')}",
        "seed": cfg.seed,
        "history": history,
        "wandb": bool(cfg.get("logger")) and "wandb" in cfg.logger,
    }


def summarise(sweep: SweepDir) -> list[dict]:
    """One row per job, each named by what sets it apart."""
    jobs = sweep.jobs()
    return name_runs([read_job(job) for job in jobs], [job.path for job in jobs])


def name_runs(rows: list[dict], jobs: list[Path]) -> list[dict]:
    """Set each row's "run": the overrides that set it apart from the other jobs (else its directory)."""
    shared = set.intersection(*(set(row["overrides"]) for row in rows)) if rows else set()
    for row, job in zip(rows, jobs, strict=True):
        row["run"] = " ".join(o for o in row["overrides"] if o not in shared) or job.name
    return rows


def _fmt(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4f}" if value <= 1 else f"{value:.1f}"
    return str(value)


def grouped_over_seeds(rows: list[dict]) -> list[dict]:
    """Mean and spread (min..max) over seeds for every setting (a run's overrides but the seed) that ran
    more than one seed."""
    groups: dict = {}
    for row in rows:
        if row["status"] == "ok":
            setting = " ".join(o for o in row["run"].split() if not o.startswith("seed=")) or "(defaults)"
            groups.setdefault(setting, []).append(row)
    out = []
    for setting, members in groups.items():
        if len(members) < 2:
            continue
        entry = {"setting": setting, "runs": len(members)}
        for key in ("test_exact_match", "steps_to_99", "train_seconds", "prunable_fraction"):
            values = [m[key] for m in members if m[key] is not None]
            entry[key] = (statistics.mean(values), min(values), max(values)) if values else None
        out.append(entry)
    return out


def markdown(rows: list[dict]) -> str:
    """The summary as a Markdown table, then the mean (min..max) over seeds where a setting ran several."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_fmt(row[c]) for c in COLUMNS) + " |" for row in rows]
    grouped = grouped_over_seeds(rows)
    if grouped:
        lines += [
            "",
            "Mean (min..max) over seeds:",
            "",
            "| setting | runs | test_exact_match | steps_to_99 | train_seconds | prunable_fraction |",
            "|---|---|---|---|---|---|",
        ]
        for g in grouped:
            cells = [
                f"{m[0]:.4g} ({m[1]:.4g}..{m[2]:.4g})" if m else "—"
                for m in (g["test_exact_match"], g["steps_to_99"], g["train_seconds"], g["prunable_fraction"])
            ]
            lines.append(f"| {g['setting']} | {g['runs']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def record_summary(sweep: SweepDir, rows: list[dict]) -> None:
    """sweep_summary.csv/.md/.png, and the same table and figure to wandb when the sweep used it."""
    from analysis.plots import sweep_figure  # matplotlib only when a sweep ends

    record_sweep(sweep, COLUMNS, rows, markdown(rows), sweep_figure(rows), wandb=any(row["wandb"] for row in rows))
