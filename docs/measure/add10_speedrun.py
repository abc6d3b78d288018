"""10-digit addition in a minute: ``experiment=add10_speedrun`` on seeds 0-4, one whole command at a time (wall and
CPU seconds, the load), ``python verify.py`` on every run; and the same preset stopped at its first perfect
validation instead of at its validation loss, seeds 0-4, to show what the later stop is for."""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

from .add10 import Verified, verified
from .common import Variant, not_measured, pct, reached, results, run_variants, secs, train, verify

COMMAND = "python train.py experiment=add10_speedrun seed=S threads=1; python verify.py <run>"
COST = "~15 min"
SEEDS = (0, 1, 2, 3, 4)
PHASES = ("startup", "build", "training", "test", "analysis", "report")
FIRST_PERFECT = Variant(
    "stopped at the first perfect validation", "add10_speedrun",
    ("callbacks.early_stopping.monitor=val/exact_match", "callbacks.early_stopping.mode=max",
     "callbacks.early_stopping.stopping_threshold=0.9999", "logger=none"),
    SEEDS,
)  # fmt: skip


def cpu_seconds() -> float:
    """User + system CPU seconds of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(scratch: Path, seed: int) -> dict:
    """One whole command, alone: steps, wall and CPU seconds, the load around it, its phases, verify.py's verdict."""
    out = scratch / "add10_speedrun" / f"seed{seed}"
    load, cpu = os.getloadavg()[0], cpu_seconds()
    ran = train(scratch, "experiment=add10_speedrun", f"seed={seed}", "threads=1", f"hydra.run.dir={out}")
    cpu, load = cpu_seconds() - cpu, [round(load, 1), round(os.getloadavg()[0], 1)]
    r, val = results(out), json.loads((out / "history.json").read_text())["val"]
    first = next((h["step"] for h in val if h["exact_match"] >= 1.0), None)
    best = max(val, key=lambda h: h["exact_match"])
    return {
        "seed": seed, "steps": r["steps"], "steps_to_100": first, "val_loss": val[-1]["loss"],
        "best_val": best["exact_match"], "best_val_step": best["step"],
        "whole_seconds": ran.seconds, "cpu_seconds": round(cpu, 1), "peak_gb": ran.peak_gb, "load": load,
        "phases": r["phases"], "test_exact_match": r["test_exact_match"], "verify": verify(out, scratch),
    }  # fmt: skip


def measure(scratch: Path) -> dict:
    """experiment=add10_speedrun on seeds 0-4, one whole command at a time on one thread (wall and CPU seconds),
    python verify.py on each; then the preset stopped at its first perfect validation, seeds 0-4 (two at a time)."""
    runs = [timed(scratch, seed) for seed in SEEDS]
    first_perfect = run_variants(scratch, "add10_speedrun_first", [FIRST_PERFECT], verified(scratch))
    return {"command": COMMAND, "runs": runs, "first_perfect": first_perfect}


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return (xs[len(xs) // 2] + xs[(len(xs) - 1) // 2]) / 2


def block_add10_speedrun(m: dict) -> str:
    """Each seed of the preset: steps, the whole command's wall and CPU seconds and the load, verify.py's verdict."""
    x = m.get("add10_speedrun")
    if not x:
        return not_measured("add10_speedrun")
    lines = [
        "| seed | steps (100% val at) | whole command | CPU | load (start / end) | test exact-match | random pairs "
        "| edge cases | verify.py |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in x["runs"]:
        v = Verified.of(r["verify"], named=3)
        lines.append(
            f"| {r['seed']} | {r['steps']:,} ({reached(r, 'steps_to_100')}) | {secs(r['whole_seconds'])} | "
            f"{secs(r['cpu_seconds'])} | {r['load'][0]:.1f} / {r['load'][1]:.1f} | {pct(r['test_exact_match'])} | "
            f"{v.pairs} | {v.edges} | {v.verdict} |"
        )
    return "\n".join(lines)


def block_add10_speedrun_phases(m: dict) -> str:
    """The whole command's phases, each the median over the seeds, in seconds and as a share of the whole."""
    x = m.get("add10_speedrun")
    if not x:
        return not_measured("add10_speedrun")
    each = {p: median([r["phases"].get(p, 0.0) for r in x["runs"]]) for p in PHASES}
    whole = sum(each.values())
    cells = " | ".join(f"{each[p]:.1f} s ({each[p] / whole:.0%})" for p in PHASES)
    return "\n".join([f"| {' | '.join(PHASES)} |", "|" + "---|" * len(PHASES), f"| {cells} |"])


def block_add10_speedrun_first_perfect(m: dict) -> str:
    """The preset stopped at its first perfect validation: steps and verify.py's verdict, seed by seed."""
    x = m.get("add10_speedrun")
    if not x:
        return not_measured("add10_speedrun")
    lines = ["| seed | steps | test exact-match | random pairs | edge cases | verify.py |", "|---|---|---|---|---|---|"]
    for r in x["first_perfect"]:
        v = Verified.of(r["verify"], named=3)
        lines.append(
            f"| {r['seed']} | {r['steps']:,} | {pct(r['test_exact_match'])} | {v.pairs} | {v.edges} | {v.verdict} |"
        )
    return "\n".join(lines)


def block_add10_speedrun_summary(m: dict) -> str:
    """One line: the preset's whole commands and steps over the seeds, and how many pass verify.py, both stops."""
    x = m.get("add10_speedrun")
    if not x:
        return not_measured("add10_speedrun")
    runs, first = x["runs"], x["first_perfect"]
    steps = sorted(r["steps"] for r in runs)
    slowest = max(r["whole_seconds"] for r in runs)
    return (
        f"seeds 0–{len(runs) - 1}: whole command median {secs(median([r['whole_seconds'] for r in runs]))} "
        f"(CPU {secs(median([r['cpu_seconds'] for r in runs]))}, slowest {secs(slowest)}), "
        f"{steps[0]:,}–{steps[-1]:,} steps, verify.py passed by {sum(r['verify']['passed'] for r in runs)} of "
        f"{len(runs)}; stopped at the first perfect validation instead: {min(r['steps'] for r in first):,}–"
        f"{max(r['steps'] for r in first):,} steps, verify.py passed by {sum(r['verify']['passed'] for r in first)} "
        f"of {len(first)}"
    )


BLOCKS = {
    "add10_speedrun": block_add10_speedrun,
    "add10_speedrun_phases": block_add10_speedrun_phases,
    "add10_speedrun_first_perfect": block_add10_speedrun_first_perfect,
    "add10_speedrun_summary": block_add10_speedrun_summary,
}
