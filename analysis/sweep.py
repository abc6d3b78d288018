"""The side-by-side comparison written when a Hydra multirun ends (e.g. a sweep over head counts).

Every job leaves results.json and history.json in its own directory; this reads them all and writes
sweep_summary.csv, sweep_summary.md and sweep_summary.png into the sweep directory, then logs the same
table and image to wandb, in the sweep's group, when the sweep used the wandb logger.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from training.rundir import RunDir

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


def read_job(job_dir: Path) -> dict:
    """One row of the summary from a job directory (also for a job that failed or never finished)."""
    cfg = OmegaConf.load(job_dir / ".hydra" / "config.yaml")
    overrides = OmegaConf.load(job_dir / ".hydra" / "overrides.yaml")
    results_path = RunDir(job_dir).results
    results = (
        json.loads(results_path.read_text())
        if results_path.exists()
        else {"status": "failed", "error": "no results.json"}
    )
    history_path = RunDir(job_dir).history
    history = json.loads(history_path.read_text())["val"] if history_path.exists() else []
    n_heads, d_model = cfg.model.n_heads, cfg.model.d_model
    ok = results.get("status") == "ok"
    return {
        "overrides": list(overrides),
        "n_heads": n_heads,
        "head_dim": d_model // n_heads if isinstance(n_heads, int) and n_heads > 0 and d_model % n_heads == 0 else None,
        "n_params": results.get("n_params"),
        "attention_params": results.get("attention_params"),
        "steps_to_99": steps_to(history, 0.99),
        "test_exact_match": results.get("test_exact_match"),
        "train_seconds": results.get("train_seconds"),
        "prunable_fraction": results.get("prunable_fraction"),
        "status": "ok" if ok else f"failed: {results.get('error', 'unknown error')}",
        "seed": cfg.seed,
        "history": history,
        "wandb": bool(cfg.get("logger")) and "wandb" in cfg.logger,
    }


def job_dirs(sweep_dir: Path) -> list[Path]:
    """Job directories of a sweep, in job order."""
    jobs = [p.parent.parent for p in sweep_dir.glob("*/.hydra/overrides.yaml")]
    return sorted(jobs, key=lambda p: (int(p.name.split("_")[0]) if p.name.split("_")[0].isdigit() else 0, p.name))


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


def write_summary(sweep_dir: Path) -> list[dict]:
    """Write sweep_summary.csv/.md/.png into ``sweep_dir``; return the rows."""
    from analysis.plots import sweep_figure  # matplotlib only when a sweep ends

    jobs = job_dirs(sweep_dir)
    rows = name_runs([read_job(job) for job in jobs], jobs)
    with (sweep_dir / "sweep_summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
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
    (sweep_dir / "sweep_summary.md").write_text("\n".join(lines) + "\n")
    sweep_figure(rows, sweep_dir / "sweep_summary.png")
    return rows


def log_to_wandb(sweep_dir: Path, rows: list[dict], group: str) -> None:
    """The summary as its own wandb run in the sweep's group (offline unless WANDB_MODE says otherwise)."""
    import wandb

    run = wandb.init(
        project="tinycalc",
        group=group,
        name="sweep-summary",
        job_type="summary",
        dir=str(sweep_dir),
        mode=os.environ.get("WANDB_MODE", "offline"),
    )
    run.log(
        {
            "sweep/summary": wandb.Table(columns=COLUMNS, data=[[row[c] for c in COLUMNS] for row in rows]),
            "sweep/figure": wandb.Image(str(sweep_dir / "sweep_summary.png")),
        }
    )
    run.finish()


class SweepSummary(Callback):
    """Hydra callback: when a multirun ends, compare its runs side by side."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        rows = write_summary(sweep_dir)
        failed = sum(row["status"] != "ok" for row in rows)
        print(f"sweep summary: {sweep_dir / 'sweep_summary.md'} ({len(rows)} runs, {failed} failed)")
        if any(row["wandb"] for row in rows):
            log_to_wandb(sweep_dir, rows, group=sweep_dir.name)
        from analysis.html_report import write_sweep_report

        print(f"sweep report: {write_sweep_report(sweep_dir)}")
