"""Where a whole ``python train.py`` goes: each phase's seconds (startup, build, training, test, analysis, report: the
run's own record, results.json's ``phases``) and its share of the whole command, for the default run and the 10-digit
preset (experiment=add10_speedrun), the runs taking turns (``python bench.py phases``)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

PHASES = ("startup", "build", "training", "test", "analysis", "report")
RUNS = {  # name -> train.py overrides; each run as a user types it
    "default": [],
    "add10_speedrun": ["experiment=add10_speedrun"],
}


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return (xs[len(xs) // 2] + xs[(len(xs) - 1) // 2]) / 2


def summarise(phases: list[dict], walls: list[float], steps: list[int]) -> dict:
    """Runs of one command -> each phase's median seconds and share of their sum, the rest of the whole command
    (the interpreter's start before the run's clock, its exit), and the medians of the whole command and steps."""
    each = {p: round(median([run.get(p, 0.0) for run in phases]), 2) for p in PHASES}
    inside, whole = sum(each.values()), median(walls)
    each["outside"] = round(max(whole - inside, 0.0), 2)  # before the run's clock starts and after it stops
    return {
        "seconds": each,
        "share": {p: round(s / whole, 4) if whole else 0.0 for p, s in each.items()},
        "whole_seconds": round(whole, 2),
        "whole_seconds_runs": [round(w, 2) for w in walls],
        "steps": steps,
    }


def bench_phases(repeat: int, overrides: list[str], say: Callable[[str], None] = print) -> dict:
    """``repeat`` rounds of each of :data:`RUNS` (+ ``overrides``), taking turns: each phase's median seconds and
    share of the whole command. An error (a run that failed) is reported under ``errors``, the others still run."""
    from benchmarks.converge import failure, timed_train

    runs = {name: {"phases": [], "walls": [], "steps": []} for name in RUNS}
    errors = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            for name, args in RUNS.items():
                say(f"phases: {name}, round {i + 1} of {repeat}")
                seconds, done, results = timed_train([*args, *overrides], Path(tmp) / f"{name}{i}")
                if done.returncode != 0 or results is None:
                    errors[name] = failure(done)
                    continue
                runs[name]["phases"].append(results["phases"])
                runs[name]["walls"].append(seconds)
                runs[name]["steps"].append(results["steps"])
    return {
        "runs": {
            name: {"command": " ".join(["python train.py", *RUNS[name], *overrides])}
            | summarise(r["phases"], r["walls"], r["steps"])
            for name, r in runs.items()
            if r["walls"]
        },
        "rounds": repeat,
        "errors": errors,
    }
