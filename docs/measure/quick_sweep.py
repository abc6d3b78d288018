"""``python train.py -m experiment=quick_sweep``: 1, 2, 4 and 8 heads on 3 seeds, each trained until it learns.
``sweep_rows`` and ``sweep_table`` serve head_sweep.py too."""

from __future__ import annotations

from pathlib import Path

from .common import (
    IMAGES,
    code_hash,
    finished_jobs,
    image,
    load_text,
    not_measured,
    pct,
    results,
    screenshot,
    secs,
    train,
    wrap,
)

COMMAND = "python train.py -m experiment=quick_sweep"
COST = "~5 min quiet (12 runs: its CPU time at 1 thread; 26 min measured at a load of 13)"
DRAWS = {
    "quick_sweep.png": ["analysis/plots.py", "analysis/sweep.py"],
    "sweep_report.png": [
        "analysis/report_page.js",
        "analysis/report_page.html",
        "analysis/html_report.py",
        "analysis/lab.js",
    ],
}
ROW = ("n_heads", "head_dim", "seed", "steps_to_99", "test_exact_match", "train_seconds", "prunable_fraction")
ROW += ("learned", "status")


def sweep_rows(sweep: Path) -> list[dict]:
    """The sweep summary's rows (analysis.sweep.summarise), the columns the tables show."""
    from analysis.sweep import summarise
    from storage.rundir import SweepDir

    return [{k: row[k] for k in ROW} for row in summarise(SweepDir(sweep))]


def measure(scratch: Path) -> dict:
    """python train.py -m experiment=quick_sweep: 1, 2, 4, 8 heads on 3 seeds, each trained until it learns; the
    conclusion its sweep_summary.md and sweep_report.html end with (analysis/conclusion.py), as they said it."""
    from analysis.conclusion import conclude
    from analysis.sweep import summarise
    from storage.rundir import SweepDir

    ran = train(scratch, "-m", "experiment=quick_sweep", "hydra.sweep.dir=multirun/quick")
    sweep = scratch / "multirun/quick"
    images: dict[str, str] = {}
    image(images, sweep / "sweep_summary.png", "quick_sweep.png", DRAWS["quick_sweep.png"])
    if screenshot(sweep / "sweep_report.html", IMAGES / "sweep_report.png", 1400, scratch):
        images["sweep_report.png"] = code_hash(DRAWS["sweep_report.png"])
    runs = [results(job) for job in finished_jobs(sweep)]
    return {
        "command": COMMAND,
        "whole_seconds": ran.seconds,
        "rows": sweep_rows(sweep),
        "steps": {f"{r['n_heads']} heads, seed {r['seed']}": r["steps"] for r in runs},
        "conclusion": conclude(summarise(SweepDir(sweep))),
        "images": images,
    }


def sweep_table(rows: list[dict], with_seed: bool) -> list[str]:
    by_heads: dict[int, list[dict]] = {}
    for row in rows:
        by_heads.setdefault(row["n_heads"], []).append(row)
    seeds = " / ".join(f"seed {r['seed']}" for r in by_heads[min(by_heads)]) if with_seed else ""
    reached = f"reached 99% val ({seeds})" if seeds else "reached 99% val"
    lines = [
        f"| n_heads | head_dim | {reached} | test exact-match | train s | prunable fraction |",
        "|---|---|---|---|---|---|",
    ]
    for n, group in sorted(by_heads.items()):
        group = sorted(group, key=lambda r: r["seed"] or 0)
        reached = " / ".join(f"step {r['steps_to_99']:,}" if r["steps_to_99"] else "never" for r in group)
        exact = " / ".join(pct(r["test_exact_match"]) for r in group)
        seconds = " / ".join(f"{r['train_seconds']:.0f}" for r in group)
        prunable = " / ".join(f"{r['prunable_fraction']:.2g}" if r["learned"] else "not learned" for r in group)
        lines.append(f"| {n} | {group[0]['head_dim']} | {reached} | {exact} | {seconds} | {prunable} |")
    return lines


def block_quick_sweep(m: dict) -> str:
    q = m.get("quick_sweep")
    if not q:
        return not_measured("quick_sweep")
    seeds = len({r["seed"] for r in q["rows"]})
    machine = m.get("machine") or {}
    when, cores = machine.get("sections", {}).get("quick_sweep", {}), machine.get("machine", {}).get("cores", "?")
    load = load_text(when)
    return "\n".join(
        [
            f"`{q['command']}` took {secs(q['whole_seconds'])} (the whole command, {len(q['rows'])} runs, at a load "
            f"of {load} at its start / end on {cores} cores: above the cores' count the "
            "seconds are upper bounds); each run stopped once every validation problem was right:",
            "",
            *sweep_table(q["rows"], with_seed=seeds > 1),
            "",
            "The conclusion its `sweep_summary.md` and `sweep_report.html` end with (`analysis/conclusion.py`):",
            "",
            *(f"- {line}" for line in q.get("conclusion", [])),
            "",
            "![the quick sweep: learning curves and final accuracy](images/quick_sweep.png)",
            "",
            "![the quick sweep's page, sweep_report.html](images/sweep_report.png)",
        ]
    )


def block_quick_sweep_summary(m: dict) -> str:
    """The README's sentences: per head count, the steps to 99% validation and the test exact-match over seeds."""
    q = m.get("quick_sweep")
    if not q:
        return not_measured("quick_sweep")
    by_heads: dict[int, list[dict]] = {}
    for row in q["rows"]:
        by_heads.setdefault(row["n_heads"], []).append(row)

    def span(values: list, show) -> str:
        low, high = min(values), max(values)
        return show(low) if low == high else f"{show(low)} to {show(high)}"

    parts = []
    for n, group in sorted(by_heads.items()):
        steps = [r["steps_to_99"] for r in group if r["steps_to_99"]]
        reached = f"reached 99% on validation at step {span(steps, '{:,}'.format)}" if steps else "never reached 99%"
        right = span([r["test_exact_match"] for r in group], pct)
        parts.append(f"{n} head{'s' * (n > 1)} {reached} and got {right} of the test right")
    seeds = len({r["seed"] for r in q["rows"]})
    return wrap(f"Over {seeds} seeds, " + "; ".join(parts) + " ([the table](docs/results.md#a-quick-sweep)).")


BLOCKS = {"quick_sweep": block_quick_sweep, "quick_sweep_summary": block_quick_sweep_summary}
