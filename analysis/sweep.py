"""The side-by-side comparison of a Hydra multirun's jobs (e.g. a sweep over head counts): read, aggregate, record.

Every job leaves results.json and history.json in its own directory; ``summarise`` reads them all into rows
(pure), and ``record_summary`` writes sweep_summary.csv, sweep_summary.md and sweep_summary.png through
:class:`SweepDir`, then logs the same table and image to wandb, in the sweep's group, when the sweep used the
wandb logger. The Hydra callback that runs it when a multirun ends is in analysis/hydra_callbacks.py.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from omegaconf import OmegaConf

from analysis import conclusion
from analysis.metric import learned
from analysis.record import record_sweep
from data.problems import MASTERED
from storage.messages import one_line
from storage.rundir import RunDir, SweepDir, parse_json, parse_yaml, read_text

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


def _load(path: Path, damaged: list[str], kind: str = "json"):
    """A job file's content, or None with one ``<file>: <what is wrong>`` entry in ``damaged``."""
    if not path.exists():
        return None
    try:
        if kind == "yaml":
            value = parse_yaml(read_text(path, path.parent), path)  # bounded: storage/rundir.py
            ok = OmegaConf.is_config(value)
        else:
            value = parse_json(read_text(path, path.parent), path)  # bounded: storage/rundir.py
            ok = isinstance(value, dict)
        if ok:
            return value
        what = f"not a mapping ({type(value).__name__})"
    except Exception as e:  # OSError, bad UTF-8, bad JSON or YAML: each library raises its own kind
        what = f"unreadable ({one_line(e)})"
    damaged.append(f"{path}: {what}")
    return None


def _status(job: RunDir, results: dict | None, broken: list[str]) -> str:
    """ "ok", or "failed: why" -- a job whose files are damaged, that never finished or was refused counts failed."""
    if broken:
        return f"failed: damaged {', '.join(Path(b.split(': ')[0]).name for b in broken)}"
    if results is None:
        return "failed: no results.json"
    status = results.get("status")
    if status == "ok":
        return "ok"
    if status == "running":
        owner = job.owner()
        return f"failed: still running (pid {owner})" if owner else "failed: did not finish (killed?)"
    return f"failed: {results.get('error') or status or 'unknown error'}"


WANDB_KEYS = ("project", "entity", "mode", "tags")  # the jobs' logger.wandb settings the summary run takes


def _get(cfg, key: str):
    try:
        return OmegaConf.select(cfg, key, default=None) if cfg is not None else None
    except Exception:  # an interpolation that does not resolve
        return None


def _plain(value):
    """A config's value as plain Python (a list, not a ListConfig): rows are written as JSON."""
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def read_job(job: RunDir, damaged: list[str] | None = None) -> dict:
    """One row of the summary from a job directory (also for a job that failed, never finished, or whose files
    are damaged: each damaged file is one entry in ``damaged``, and the job counts as failed)."""
    damaged = [] if damaged is None else damaged
    before = len(damaged)
    cfg = _load(job.hydra_config, damaged, "yaml")
    try:
        overrides = [str(o) for o in parse_yaml(job.read_text(job.hydra_overrides), job.hydra_overrides)]
    except Exception as e:
        damaged.append(f"{job.hydra_overrides}: unreadable ({one_line(e)})")
        overrides = []
    results = _load(job.results, damaged)
    history_file = _load(job.history, damaged)
    history = history_file.get("val") if history_file is not None else []
    if not isinstance(history, list) or not all(
        isinstance(h, dict) and isinstance(h.get("step"), int) and isinstance(h.get("exact_match"), (int, float))
        for h in history
    ):
        damaged.append(f"{job.history}: its 'val' is not a list of {{step, exact_match}}")
        history = []
    if (
        isinstance(results, dict)
        and results.get("status") == "ok"
        and not isinstance(results.get("test_exact_match"), (int, float))
    ):
        damaged.append(f"{job.results}: status ok but no test_exact_match")
    status = _status(job, results, damaged[before:])
    results = results or {}
    n_heads, d_model = _get(cfg, "model.n_heads"), _get(cfg, "model.d_model")
    number = lambda key: results.get(key) if isinstance(results.get(key), (int, float)) else None  # noqa: E731
    wandb = {key: _plain(_get(cfg, f"logger.wandb.{key}")) for key in WANDB_KEYS} if _get(cfg, "logger.wandb") else None
    return {
        "overrides": overrides,
        "n_heads": n_heads,
        "head_dim": d_model // n_heads
        if isinstance(n_heads, int) and isinstance(d_model, int) and n_heads > 0 and d_model % n_heads == 0
        else None,
        "n_params": number("n_params"),
        "attention_params": number("attention_params"),
        "steps_to_99": steps_to(history, MASTERED),
        "test_exact_match": number("test_exact_match"),
        "train_seconds": number("train_seconds"),
        # a model that has not learned has nothing to lose: no pruning claim about it
        "prunable_fraction": number("prunable_fraction") if learned(number("test_exact_match")) else None,
        "learned": learned(number("test_exact_match")),
        "status": status,
        "seed": _get(cfg, "seed"),
        "history": history,
        "wandb": wandb,
    }


def summarise(sweep: SweepDir, damaged: list[str] | None = None) -> list[dict]:
    """One row per job (nested job directories included), each named by what sets it apart; each damaged file
    is one ``<file>: <what is wrong>`` entry in ``damaged``."""
    jobs = sweep.jobs()
    damaged = [] if damaged is None else damaged
    return name_runs([read_job(job, damaged) for job in jobs], [job.path for job in jobs])


def name_runs(rows: list[dict], jobs: list[Path]) -> list[dict]:
    """Set each row's "run": the overrides that set it apart from the other jobs (else its directory)."""
    shared = set.intersection(*(set(row["overrides"]) for row in rows)) if rows else set()
    for row, job in zip(rows, jobs, strict=True):
        row["run"] = " ".join(o for o in row["overrides"] if o not in shared) or job.name
    return rows


def _cell(row: dict, column: str) -> str:
    if column == "prunable_fraction" and row["status"] == "ok" and not row.get("learned", True):
        return "not learned"
    return _fmt(row[column])


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
            groups.setdefault(conclusion.setting_of(row), []).append(row)
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
    """The summary as a Markdown table, the mean (min..max) over seeds where a setting ran several, then the
    conclusion (analysis/conclusion.py)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(row, c) for c in COLUMNS) + " |" for row in rows]
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
    return "\n".join(lines) + "\n\n" + conclusion.markdown(rows)


def record_summary(sweep: SweepDir, rows: list[dict]) -> None:
    """sweep_summary.csv/.md/.png, and the same table and figure to wandb when the sweep used it, with its jobs'
    logger settings."""
    from analysis.plots import sweep_figure  # matplotlib only when a sweep ends

    wandb = next((row["wandb"] for row in rows if row["wandb"] is not None), None)  # the jobs' logger.wandb
    record_sweep(sweep, COLUMNS, rows, markdown(rows), sweep_figure(rows), wandb)
