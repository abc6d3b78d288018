"""One self-contained page per run (report.html) and per sweep (sweep_report.html).

Everything the page shows is read from files already in the directory and inlined as JSON; the page draws
it with a small vanilla-JS renderer (analysis/report_page.js, styled by analysis/report_page.html). No
network fetch, no asset folder: the file opens from file:// on a laptop, offline.

    python -m analysis.html_report RUN_DIR_OR_SWEEP_DIR     re-write the page(s) of an existing directory
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path
from urllib.parse import quote

from analysis.conclusion import conclude
from analysis.lab import LAB_JS, guided_experiments, lab_for_run
from analysis.sweep import grouped_over_seeds, summarise
from data.problems import MASTERED
from storage.messages import one_line
from storage.rundir import RunDir, RunFileError, SweepDir

HERE = Path(__file__).parent
MAX_MISTAKES = 100  # mistakes listed on the page; the counts cover all of them
MAX_SNAPSHOTS = 8  # attention maps taken during training shown besides the final ones (evenly spaced)


class ReportError(Exception):
    """The directory is not something a report can be written for; the message is one line."""


class Damage(list):
    """The damaged files met while reading a directory: one ``<file>: <what is wrong>`` entry each."""

    def note(self, path: Path, what: str) -> None:
        self.add(f"{path}: {what}")

    def add(self, entry: str) -> None:
        """One ``<file>: <what is wrong>`` line (a :class:`RunFileError`'s message is one)."""
        if entry not in self:
            self.append(entry)

    def warn(self) -> None:
        for entry in self:
            print(f"warning: {entry}", file=sys.stderr)


# Every file is read through the run directory's reader (storage/rundir.py: bounded in size, depth and kind);
# a file it refuses is left out of the page and noted in ``damage``, and its section says "not recorded".
def _json(run: RunDir, path: Path, damage: Damage, kind: type = dict):
    """A JSON file's content (a ``kind``), or None: absent, or damaged (then noted in ``damage``)."""
    try:
        return run.read_json(path, kind)
    except RunFileError as e:
        damage.add(str(e))
        return None


def _csv(run: RunDir, path: Path, damage: Damage) -> list[dict] | None:
    """An analysis table, its numbers as numbers; None: absent, or damaged (noted)."""
    try:
        rows = run.read_csv(path)
    except RunFileError as e:
        damage.add(str(e))
        return None
    if rows is None:
        return None
    if not rows and not run.read_text(path).strip():
        damage.note(path, "empty (no header, no rows)")
        return None
    if any(None in row or None in row.values() for row in rows):  # a row longer or shorter than the header
        damage.note(path, "not a whole table (a row and the header disagree)")
        return None
    return [{k: _number(v) for k, v in row.items()} for row in rows]


def _number(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except (TypeError, ValueError):
            pass
    return text


def _attention(run: RunDir, path: Path) -> dict:
    """A maps file with the causal zeros dropped (row q keeps keys 0..q) and 3 decimals: half the size."""
    raw = run.read_json(path)
    raw["weights"] = [
        [[[[round(x, 3) for x in row[: q + 1]] for q, row in enumerate(head)] for head in probe] for probe in layer]
        for layer in raw["weights"]
    ]
    return raw


def _snapshots(run: RunDir, damage: Damage) -> list[dict]:
    """The maps drawn during training (at most MAX_SNAPSHOTS, evenly spaced, the last kept), then the final;
    a damaged maps file is left out (and noted)."""
    steps = run.attention_snapshots()
    if len(steps) > MAX_SNAPSHOTS:
        steps = [steps[round(i * (len(steps) - 1) / (MAX_SNAPSHOTS - 1))] for i in range(MAX_SNAPSHOTS)]
    final = run.attention_data("final")
    maps = []
    for path in steps + ([final] if os.path.lexists(final) else []):
        try:
            maps.append(_attention(run, path))
        except RunFileError as e:
            damage.add(str(e))
        except Exception as e:  # weights of the wrong shape or type
            damage.note(path, f"not an attention maps file ({one_line(e)})")
    return maps


def _mistakes(run: RunDir, data: dict | None, damage: Damage) -> dict | None:
    """test_mistakes.json, trimmed to MAX_MISTAKES (its counts cover all of them); what is damaged is noted."""
    recorded = _json(run, run.mistakes, damage)
    if recorded is None:
        return None
    mistakes = recorded.get("mistakes", [])
    if not isinstance(mistakes, list) or not all(isinstance(m, dict) for m in mistakes):
        damage.note(run.mistakes, "its 'mistakes' is not a list of objects")
        return None
    mistakes = [_clip_mistake(m) for m in mistakes[:MAX_MISTAKES]] + mistakes[MAX_MISTAKES:]
    by_place = recorded.get("wrong_digits_by_place")
    if by_place is None and isinstance(data, dict):  # recorded by runs before the count was written with them
        from data.build import problem_format
        from training.results import wrong_digits_by_place

        try:
            by_place = wrong_digits_by_place(problem_format(**data), mistakes)
        except Exception as e:  # a truth_text longer than the answer, a format that does not build, ...
            damage.note(run.mistakes, f"mistakes that do not fit the run's format ({one_line(e)})")
            by_place = None
    count = lambda key, default: recorded.get(key) if isinstance(recorded.get(key), int) else default  # noqa: E731
    return {
        "n_test": count("n_test", None),
        "n_mistakes": count("n_mistakes", len(mistakes)),
        "n_recorded": len(mistakes),
        "wrong_digits_by_place": by_place if isinstance(by_place, list) else None,
        "mistakes": mistakes[:MAX_MISTAKES],
    }


MAX_TEXT = 200  # characters of a recorded string shown on the page


def _clip_mistake(m: dict) -> dict:
    """A mistake with its strings cut to MAX_TEXT characters (a damaged file may hold megabytes)."""
    return {k: v[:MAX_TEXT] + "..." if isinstance(v, str) and len(v) > MAX_TEXT else v for k, v in m.items()}


def _facts(run: RunDir, results: dict, damage: Damage) -> dict:
    """analysis.json, or for a run recorded before it existed (or whose analysis.json is damaged), the same
    facts rebuilt from its format and config."""
    facts = _json(run, run.analysis, damage)
    if facts is not None:
        return facts
    from analysis.pipeline import HeadAnalysis, legacy_facts

    tolerance = HeadAnalysis.tolerance
    config = _config(run, damage)
    if config is not None:
        from omegaconf import OmegaConf

        try:  # as written, never resolved: an interpolation is not followed
            tolerance = float(OmegaConf.to_container(config)["analysis"]["tolerance"])
        except (KeyError, TypeError, ValueError):
            pass
        except Exception as e:
            damage.note(run.config, f"analysis.tolerance unreadable ({one_line(e)})")
    try:
        return legacy_facts(results.get("data"), tolerance)
    except Exception as e:  # a damaged "data" entry in results.json
        damage.note(run.results, f"its 'data' is not a problem format ({one_line(e)})")
        return {}


def _analyses(run: RunDir, facts: dict, damage: Damage) -> list[dict]:
    """analysis.json's analyses, each a mapping with a name and its columns; [] (noted) when they are not."""
    analyses = facts.get("analyses", [])
    if isinstance(analyses, list) and all(
        isinstance(a, dict)
        and isinstance(a.get("name"), str)
        and isinstance(a.get("columns", []), list)
        and all(isinstance(c, dict) for c in a.get("columns", []))
        for a in analyses
    ):
        return analyses
    damage.note(run.analysis, "its 'analyses' is not a list of named analyses with their columns")
    return []


def _config(run: RunDir, damage: Damage):
    """config.yaml as a DictConfig, or None (absent, or damaged: noted)."""
    try:
        return run.read_yaml(run.config)
    except RunFileError as e:
        damage.add(str(e))
        return None


def _text(run: RunDir, path: Path, damage: Damage) -> str | None:
    try:
        return run.read_text(path)
    except RunFileError as e:
        damage.add(str(e))
        return None


def run_data(run_dir: Path, facts: dict | None = None, damage: Damage | None = None) -> dict:
    """Everything a run's page shows: results, history, mistakes and maps from the run's files; the analyses'
    rows from their CSVs, with ``facts`` (analysis.json: what the page needs to render them) as recorded.
    A damaged file is left out and noted in ``damage`` (one entry per file); the rest is shown."""
    run = RunDir(run_dir)
    damage = Damage() if damage is None else damage
    if not os.path.lexists(run.results):
        raise ReportError(f"{run_dir} is not a run directory (no results.json)")
    results = _json(run, run.results, damage)
    if results is None:
        results = {"status": "failed", "error": f"{run.results.name} is damaged; what else was readable is shown"}
    facts = facts or _facts(run, results, damage)
    analyses = _analyses(run, facts, damage)
    history = (_json(run, run.history, damage) or {}).get("val", [])
    if not isinstance(history, list):
        damage.note(run.history, "its 'val' is not a list")
        history = []
    _config(run, damage)  # a damaged config.yaml is named; the page still shows its text
    tables = [a | {"rows": _csv(run, run.table(a["name"]), damage)} for a in analyses]
    lab = lab_for_run(run.path) if results.get("status") == "ok" else None  # the model, run in the page
    if lab and "format" in lab:  # the course's experiments, chosen from this run's own numbers
        try:
            lab["experiments"] = guided_experiments(lab["format"], results, {a["name"]: a["rows"] for a in tables})
        except (KeyError, TypeError, ValueError) as e:  # a damaged table: the lab without its experiments
            damage.add(f"the lab's guided experiments are left out ({one_line(e)})")
    return {
        "kind": "run",
        "name": run.path.name,
        "results": results,
        "config": _text(run, run.config, damage),
        "history": history,
        "mistakes": _mistakes(run, results.get("data"), damage),
        "attention": _snapshots(run, damage),
        "lab": lab,
        **{k: v for k, v in facts.items() if k != "analyses"},
        "analyses": tables,
    }


def page_link(path: str) -> str:
    """A link the page writes to a file beside it: relative ("./" first, so no scheme such as ``javascript:`` can
    start it), and every character that could read as URL syntax ('#', '?', '%', ...) escaped; a Hydra job's
    ``key=value,key=value`` stays readable."""
    return "./" + quote(path, safe="/=,:+@")


def sweep_data(sweep: SweepDir, rows: list[dict], rewrite_runs: bool = False, damage: Damage | None = None) -> dict:
    """Everything a sweep's page shows, from its summary ``rows`` (analysis/sweep.py); writes the report of every
    finished job that has none (or all of them with ``rewrite_runs``), so that the page can link to it. A job
    whose report cannot be written is shown without a link (and noted in ``damage``)."""
    damage = Damage() if damage is None else damage
    rows = [dict(row) for row in rows]
    for row, job in zip(rows, sweep.jobs(), strict=True):
        where = job.path.relative_to(sweep.path).as_posix()  # a nested job (a swept value with '/') too
        row["dir"] = where
        row["report"] = None
        if row["status"] == "ok":
            try:
                if rewrite_runs or not job.report.exists():
                    write_run_report(job.path, damage=damage)
                row["report"] = page_link(f"{where}/{job.report.name}")
            except (ReportError, OSError) as e:
                damage.note(job.path, f"no report.html ({one_line(e)})")
        row["error_log"] = page_link(f"{where}/{job.error_log.name}") if job.error_log.exists() else None
    finished = [(row["run"], job) for row, job in zip(rows, sweep.jobs(), strict=True) if row["report"]]
    heads = heads_across_runs(finished, damage)
    return {
        "kind": "sweep",
        "name": sweep.path.name,
        "rows": rows,
        "grouped": grouped_over_seeds(rows),
        "milestone": MASTERED,
        "heads": heads,
        "conclusion": conclude(rows),
    }


def heads_across_runs(runs: list[tuple[str, RunDir]], damage: Damage) -> list[dict]:
    """Every per-head analysis the finished runs recorded, each with its rows per run (the sweep page draws one
    heatmap per run, side by side)."""
    heads: dict[str, dict] = {}
    for name, job in runs:
        for analysis in _analyses(job, _facts(job, job.read_results(), damage), damage):
            rows = _csv(job, job.table(analysis["name"]), damage) if analysis.get("view") == "heads" else None
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
    script = LAB_JS.read_text() + "\n" + (HERE / "report_page.js").read_text()  # the lab's engine, then the page
    fills = {
        "TITLE": title.replace("&", "&amp;").replace("<", "&lt;"),
        "DATA": json.dumps(_finite(data), separators=(",", ":"), allow_nan=False).replace("<", "\\u003c"),
        "SCRIPT": script.replace("</script", "<\\/script"),
    }
    return PLACEHOLDER.sub(lambda m: fills[m.group(1)], page)


def write_run_report(run_dir: str | Path, facts: dict | None = None, damage: Damage | None = None) -> Path:
    """Write ``run_dir``/report.html from the run's files (and ``facts``, analysis.json's content, when the caller
    has it in hand); return its path. Damaged files are left out of the page; each is one ``warning:`` line on
    stderr (or an entry in ``damage`` when the caller collects them)."""
    run = RunDir(run_dir)
    collected = Damage() if damage is None else damage
    page = render(run_data(run.path, facts, collected), f"tinycalc run {run.path.name}")
    if damage is None:
        collected.warn()
    return RunDir.write_text(run.report, page)


def write_sweep_report(
    sweep_dir: str | Path, rows: list[dict] | None = None, rewrite_runs: bool = False, damage: Damage | None = None
) -> Path:
    """Write ``sweep_dir``/sweep_report.html (and the report of each finished job that lacks one); ``rows``: the
    sweep's summary (analysis.sweep.summarise), read from the jobs when not given. Damaged files: as
    :func:`write_run_report`; a job with one counts as failed."""
    sweep = SweepDir(sweep_dir)
    collected = Damage() if damage is None else damage
    if rows is None:
        found: list[str] = []
        rows = summarise(sweep, found)
        collected.extend(e for e in found if e not in collected)
    page = render(sweep_data(sweep, rows, rewrite_runs, collected), f"tinycalc sweep {sweep.path.name}")
    if damage is None:
        collected.warn()
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
