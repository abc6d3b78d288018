"""One self-contained page per run (report.html) and per sweep (sweep_report.html).

Everything the page shows is read from files already in the directory and inlined as JSON; the page draws
it with a small vanilla-JS renderer (analysis/report_page.js, styled by analysis/report_page.html). No
network fetch, no asset folder: the file opens from file:// on a laptop, offline.

    python -m analysis.html_report RUN_DIR_OR_SWEEP_DIR     re-write the page(s) of an existing directory
"""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from pathlib import Path

from analysis.metric import MILESTONE
from analysis.sweep import grouped_over_seeds, summarise
from storage.rundir import RunDir, SweepDir

HERE = Path(__file__).parent
MAX_MISTAKES = 100  # mistakes listed on the page; the counts cover all of them
MAX_SNAPSHOTS = 8  # attention maps taken during training shown besides the final ones (evenly spaced)


class ReportError(Exception):
    """The directory is not something a report can be written for; the message is one line."""


def _json(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def _csv(path: Path) -> list[dict] | None:
    if not path.exists():
        return None
    with path.open(newline="") as f:
        return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]


def _number(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _attention(path: Path) -> dict:
    """A maps file with the causal zeros dropped (row q keeps keys 0..q) and 3 decimals: half the size."""
    raw = json.loads(path.read_text())
    raw["weights"] = [
        [[[[round(x, 3) for x in row[: q + 1]] for q, row in enumerate(head)] for head in probe] for probe in layer]
        for layer in raw["weights"]
    ]
    return raw


def _snapshots(run: RunDir) -> list[dict]:
    """The maps drawn during training (at most MAX_SNAPSHOTS, evenly spaced, the last kept), then the final."""
    steps = run.attention_snapshots()
    if len(steps) > MAX_SNAPSHOTS:
        steps = [steps[round(i * (len(steps) - 1) / (MAX_SNAPSHOTS - 1))] for i in range(MAX_SNAPSHOTS)]
    final = run.attention_data("final")
    return [_attention(p) for p in steps + ([final] if final.exists() else [])]


def _mistakes(run: RunDir, data: dict | None) -> dict | None:
    """test_mistakes.json, trimmed to MAX_MISTAKES (its counts cover all of them)."""
    recorded = _json(run.mistakes)
    if recorded is None:
        return None
    mistakes = recorded.get("mistakes", [])
    by_place = recorded.get("wrong_digits_by_place")
    if by_place is None and data:  # recorded by runs before the count was written with the mistakes
        from data.problems import ProblemFormat
        from training.results import wrong_digits_by_place

        by_place = wrong_digits_by_place(ProblemFormat(**data), mistakes)
    return {
        "n_test": recorded.get("n_test"),
        "n_mistakes": recorded.get("n_mistakes", len(mistakes)),
        "n_recorded": len(mistakes),
        "wrong_digits_by_place": by_place,
        "mistakes": mistakes[:MAX_MISTAKES],
    }


def _facts(run: RunDir, results: dict) -> dict:
    """analysis.json, or for a run recorded before it existed, the same facts rebuilt from its format and config."""
    facts = _json(run.analysis)
    if facts is not None:
        return facts
    from analysis.pipeline import HeadAnalysis, legacy_facts

    tolerance = HeadAnalysis.tolerance
    if run.config.exists():
        from omegaconf import OmegaConf

        tolerance = OmegaConf.select(OmegaConf.load(run.config), "analysis.tolerance", default=tolerance)
    return legacy_facts(results.get("data"), tolerance)


def run_data(run_dir: Path, facts: dict | None = None) -> dict:
    """Everything a run's page shows: results, history, mistakes and maps from the run's files; the analyses'
    rows from their CSVs, with ``facts`` (analysis.json: what the page needs to render them) as recorded."""
    run = RunDir(run_dir)
    results = _json(run.results)
    if results is None:
        raise ReportError(f"{run_dir} is not a run directory (no results.json)")
    facts = facts or _facts(run, results)
    analyses = [a | {"rows": _csv(run.table(a["name"]))} for a in facts.get("analyses", [])]
    return {
        "kind": "run",
        "name": run.path.name,
        "results": results,
        "config": run.config.read_text() if run.config.exists() else None,
        "history": (_json(run.history) or {}).get("val", []),
        "mistakes": _mistakes(run, results.get("data")),
        "attention": _snapshots(run),
        **{k: v for k, v in facts.items() if k != "analyses"},
        "analyses": analyses,
    }


def sweep_data(sweep: SweepDir, rows: list[dict], rewrite_runs: bool = False) -> dict:
    """Everything a sweep's page shows, from its summary ``rows`` (analysis/sweep.py); writes the report of every
    finished job that has none (or all of them with ``rewrite_runs``), so that the page can link to it."""
    rows = [dict(row) for row in rows]
    for row, job in zip(rows, sweep.jobs(), strict=True):
        row["dir"] = job.path.name
        row["report"] = None
        if row["status"] == "ok":
            if rewrite_runs or not job.report.exists():
                write_run_report(job.path)
            row["report"] = f"{job.path.name}/{job.report.name}"
        row["error_log"] = f"{job.path.name}/{job.error_log.name}" if job.error_log.exists() else None
    finished = [(row["run"], job) for row, job in zip(rows, sweep.jobs(), strict=True) if row["report"]]
    return {
        "kind": "sweep",
        "name": sweep.path.name,
        "rows": rows,
        "grouped": grouped_over_seeds(rows),
        "milestone": MILESTONE,
        "heads": heads_across_runs(finished),
    }


def heads_across_runs(runs: list[tuple[str, RunDir]]) -> list[dict]:
    """Every per-head analysis the finished runs recorded, each with its rows per run (the sweep page draws one
    heatmap per run, side by side)."""
    heads: dict[str, dict] = {}
    for name, job in runs:
        for analysis in _facts(job, job.read_results()).get("analyses", []):
            rows = _csv(job.table(analysis["name"])) if analysis.get("view") == "heads" else None
            if rows:
                entry = heads.setdefault(analysis["name"], analysis | {"runs": []})
                entry["runs"].append({"run": name, "rows": rows})
    return list(heads.values())


def _finite(value):
    """NaN and infinities (a diverged loss) as null: JSON has no spelling for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


PLACEHOLDER = re.compile(r"{{(TITLE|DATA|SCRIPT)}}")


def render(data: dict, title: str) -> str:
    """The page: the template with its script and the data inlined, in one pass over the template, so that no
    placeholder spelled inside the data or the title is ever filled."""
    page = (HERE / "report_page.html").read_text()
    script = (HERE / "report_page.js").read_text()
    fills = {
        "TITLE": title.replace("&", "&amp;").replace("<", "&lt;"),
        "DATA": json.dumps(_finite(data), separators=(",", ":"), allow_nan=False).replace("<", "\\u003c"),
        "SCRIPT": script.replace("</script", "<\\/script"),
    }
    return PLACEHOLDER.sub(lambda m: fills[m.group(1)], page)


def write_run_report(run_dir: str | Path, facts: dict | None = None) -> Path:
    """Write ``run_dir``/report.html from the run's files (and ``facts``, analysis.json's content, when the caller
    has it in hand); return its path."""
    run = RunDir(run_dir)
    return RunDir.write_text(run.report, render(run_data(run.path, facts), f"tinycalc run {run.path.name}"))


def write_sweep_report(sweep_dir: str | Path, rows: list[dict] | None = None, rewrite_runs: bool = False) -> Path:
    """Write ``sweep_dir``/sweep_report.html (and the report of each finished job that lacks one); ``rows``: the
    sweep's summary (analysis.sweep.summarise), read from the jobs when not given."""
    sweep = SweepDir(sweep_dir)
    rows = summarise(sweep) if rows is None else rows
    page = render(sweep_data(sweep, rows, rewrite_runs), f"tinycalc sweep {sweep.path.name}")
    return RunDir.write_text(sweep.report, page)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print(
            "usage: python -m analysis.html_report RUN_DIR_OR_SWEEP_DIR\n"
            "  re-writes report.html of a run directory, or sweep_report.html (and every job's report.html) "
            "of a multirun directory",
            file=sys.stderr,
        )
        return 2
    target = Path(argv[0])
    try:
        if not target.is_dir():
            raise ReportError(f"{target} is not a directory")
        if RunDir(target).results.exists():
            path = write_run_report(target)
        elif SweepDir(target).multirun.exists():
            path = write_sweep_report(target, rewrite_runs=True)
        else:
            raise ReportError(
                f"{target} is neither a run directory (no results.json) nor a sweep directory (no multirun.yaml)"
            )
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, TypeError) as e:  # an unreadable or damaged file
        print(f"error: cannot write a report for {target}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
