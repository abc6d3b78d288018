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
import sys
from pathlib import Path

from training.rundir import RunDir

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


def _snapshots(attention_dir: Path) -> list[dict]:
    """The maps drawn during training (at most MAX_SNAPSHOTS, evenly spaced, the last kept), then the final."""
    steps = sorted(attention_dir.glob("step*.json"))
    if len(steps) > MAX_SNAPSHOTS:
        steps = [steps[round(i * (len(steps) - 1) / (MAX_SNAPSHOTS - 1))] for i in range(MAX_SNAPSHOTS)]
    final = attention_dir / "final.json"
    return [_attention(p) for p in steps + ([final] if final.exists() else [])]


def _positions(data: dict) -> tuple[list[str], list[str], list[str]]:
    """Short and long names of every input position (a2, r0, ...) and of every position the model writes (the
    working, if shown, and the answer), in the order it writes them."""
    from data.positions import positions
    from data.problems import ProblemFormat

    fmt = ProblemFormat(**data)
    where = positions(fmt)[:-1]  # model inputs stop before [EOS]
    answer = [p.short for p in where[fmt.prompt_len :]]
    return [p.short for p in where], [p.label for p in where], answer


def _mistakes(run_dir: Path, data: dict | None) -> dict | None:
    """test_mistakes.json, trimmed to MAX_MISTAKES, with wrong answer digits counted by place."""
    recorded = _json(RunDir(run_dir).mistakes)
    if recorded is None:
        return None
    mistakes = recorded.get("mistakes", [])
    by_place = None
    if data:
        from data.problems import ProblemFormat

        fmt = ProblemFormat(**data)
        by_place = [0] * fmt.answer_len  # in the order the model writes them
        for m in mistakes:
            truth = m.get("truth_text") or fmt.answer_text(m["truth"])  # runs before show_work: no truth_text
            written = (m.get("model_text") or "").ljust(len(truth))
            for i, (got, want) in enumerate(zip(written, truth, strict=False)):
                by_place[i] += got != want
    return {
        "n_test": recorded.get("n_test"),
        "n_mistakes": recorded.get("n_mistakes", len(mistakes)),
        "n_recorded": len(mistakes),
        "wrong_digits_by_place": by_place,
        "mistakes": mistakes[:MAX_MISTAKES],
    }


def run_data(run_dir: Path) -> dict:
    """Everything a run's page shows, from the files of ``run_dir``."""
    results = _json(RunDir(run_dir).results)
    if results is None:
        raise ReportError(f"{run_dir} is not a run directory (no results.json)")
    config = RunDir(run_dir).config
    tolerance = 0.01
    if config.exists():
        from omegaconf import OmegaConf

        tolerance = OmegaConf.select(OmegaConf.load(config), "analysis.tolerance", default=tolerance)
    data = results.get("data")
    keys = keys_long = answer = None
    if data:
        keys, keys_long, answer = _positions(data)
    return {
        "kind": "run",
        "name": run_dir.name,
        "results": results,
        "config": config.read_text() if config.exists() else None,
        "tolerance": tolerance,
        "history": (_json(RunDir(run_dir).history) or {}).get("val", []),
        "mistakes": _mistakes(run_dir, data),
        "attention": _snapshots(RunDir(run_dir).attention),
        "key_labels": keys,
        "key_names": keys_long,
        "answer_places": answer,
        "ablation": _csv(RunDir(run_dir).ablation),
        "pruning": _csv(RunDir(run_dir).pruning),
    }


def sweep_data(sweep_dir: Path, rewrite_runs: bool = False) -> dict:
    """Everything a sweep's page shows; writes the report of every finished job that has none (or all of
    them with ``rewrite_runs``), so that the page can link to it."""
    from analysis.sweep import grouped_over_seeds, job_dirs, name_runs, read_job

    jobs = job_dirs(sweep_dir)
    if not jobs:
        raise ReportError(f"{sweep_dir} is not a sweep directory (no <job>/.hydra/overrides.yaml)")
    rows = name_runs([read_job(job) for job in jobs], jobs)
    for row, job in zip(rows, jobs, strict=True):
        row["dir"] = job.name
        row["report"] = None
        if row["status"] == "ok":
            if rewrite_runs or not RunDir(job).report.exists():
                write_run_report(job)
            row["report"] = f"{job.name}/report.html"
        row["error_log"] = f"{job.name}/error.log" if RunDir(job).error_log.exists() else None
    return {"kind": "sweep", "name": sweep_dir.name, "rows": rows, "grouped": grouped_over_seeds(rows)}


def _finite(value):
    """NaN and infinities (a diverged loss) as null: JSON has no spelling for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def render(data: dict, title: str) -> str:
    """The page: the template with its script and the data inlined."""
    page = (HERE / "report_page.html").read_text()
    script = (HERE / "report_page.js").read_text()
    inline = json.dumps(_finite(data), separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    title = title.replace("&", "&amp;").replace("<", "&lt;")
    return (
        page.replace("{{TITLE}}", title)
        .replace("{{DATA}}", inline)
        .replace("{{SCRIPT}}", script.replace("</script", "<\\/script"))
    )


def write_run_report(run_dir: str | Path) -> Path:
    """Write ``run_dir``/report.html from the run's files; return its path."""
    run_dir = Path(run_dir)
    path = RunDir(run_dir).report
    path.write_text(render(run_data(run_dir), f"tinycalc run {run_dir.name}"))
    return path


def write_sweep_report(sweep_dir: str | Path, rewrite_runs: bool = False) -> Path:
    """Write ``sweep_dir``/sweep_report.html (and the report of each finished job that lacks one)."""
    sweep_dir = Path(sweep_dir)
    path = sweep_dir / "sweep_report.html"
    path.write_text(render(sweep_data(sweep_dir, rewrite_runs), f"tinycalc sweep {sweep_dir.name}"))
    return path


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
        elif (target / "multirun.yaml").exists():
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
