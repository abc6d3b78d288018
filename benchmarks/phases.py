"""Where a whole ``python train.py`` goes: each phase's seconds (startup, build, training, test, analysis, report: the
run's own record, results.json's ``phases``) and its share of the whole command, for the default run beside the
previous recipe and each cut between them, and for the 10-digit preset (experiment=add10_speedrun), the runs taking
turns (``python bench.py phases``)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

PHASES = ("startup", "build", "training", "test", "analysis", "report")
# What made the default run faster than the previous recipe (issue 55), in the order they were made: each cut's name
# and the train.py overrides that undo it. The previous recipe is all of them undone (PREVIOUS_RECIPE).
CUTS = (
    (
        "batches of 128 with hard cases, stopped right by a margin (target_loss)",
        ("data.batch_size=256", "data.hard_share=0.0", "data.hard_fade_steps=0", "target_loss=null"),
    ),
    (
        "validation every 50 steps, not 25 (with it the attention maps drawn during training, every 3rd)",
        ("trainer.val_check_interval=25",),
    ),
)
PREVIOUS_RECIPE = tuple(o for _, undo in CUTS for o in undo)  # the default run before issue 55, on today's code
RUNS = {  # name -> train.py overrides; each run as a user types it
    "without the cuts": list(PREVIOUS_RECIPE),
    **{  # the previous recipe with the cuts up to this one made (the last: the default run)
        f"+ {name}" if i < len(CUTS) - 1 else "default": [o for _, undo in CUTS[i + 1 :] for o in undo]
        for i, (name, _) in enumerate(CUTS)
    },
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


def cuts_bought(runs: dict) -> list[dict]:
    """Each cut's seconds saved: the whole command's median before it (the previous rung of :data:`RUNS`) less
    the median with it, and likewise for training; None where a rung has no runs."""
    names = [n for n in RUNS if n != "add10_speedrun"]
    bought = []
    for (cut, undo), before, after in zip(CUTS, names[:-1], names[1:], strict=True):
        a, b = runs.get(before), runs.get(after)
        saved = lambda key, a=a, b=b: round(key(a) - key(b), 2) if a and b else None  # noqa: E731
        bought.append(
            {
                "cut": cut,
                "undone_by": " ".join(undo),
                "whole_seconds_saved": saved(lambda r: r["whole_seconds"]),
                "training_seconds_saved": saved(lambda r: r["seconds"]["training"]),
            }
        )
    return bought


def bench_phases(repeat: int, overrides: list[str], say: Callable[[str], None] = print) -> dict:
    """``repeat`` rounds of each of :data:`RUNS` (+ ``overrides``), taking turns: each phase's median seconds and
    share of the whole command, and what each cut bought. An error (a run that failed) is reported under
    ``errors``, the others still run."""
    from benchmarks.converge import failure, timed_train

    runs = {name: {"phases": [], "walls": [], "steps": []} for name in RUNS}
    errors = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            for n, (name, args) in enumerate(RUNS.items()):
                say(f"phases: {name}, round {i + 1} of {repeat}")
                seconds, done, results = timed_train([*args, *overrides], Path(tmp) / f"{n}-{i}")
                if done.returncode != 0 or results is None:
                    errors[name] = failure(done)
                    continue
                runs[name]["phases"].append(results["phases"])
                runs[name]["walls"].append(seconds)
                runs[name]["steps"].append(results["steps"])
    summaries = {
        name: {"command": " ".join(["python train.py", *RUNS[name], *overrides])}
        | summarise(r["phases"], r["walls"], r["steps"])
        for name, r in runs.items()
        if r["walls"]
    }
    return {"runs": summaries, "cuts": cuts_bought(summaries), "rounds": repeat, "errors": errors}
