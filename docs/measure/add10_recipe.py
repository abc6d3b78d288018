"""``experiment=add10`` with one part of its recipe taken out at a time (seeds 0-2), and ``python verify.py`` on every
run: what each part is for, side by side with add10 as configured (the add10 section's runs)."""

from __future__ import annotations

from pathlib import Path

from .add10 import Verified, verified
from .common import Variant, not_measured, pct, reached, run_variants

QUIET = ("analysis=none", "logger=none")  # runs measured for their steps and scores only
COMMAND = f"python train.py experiment=add10 <change> seed=S threads=1 {' '.join(QUIET)}; python verify.py <run>"
COST = "~35 min"
SEEDS = (0, 1, 2)
CHANGES = [  # each on top of experiment=add10
    Variant("4 heads of 16 dims (`model.n_heads=4`)", "add10", ("model.n_heads=4", *QUIET), SEEDS),
    Variant("no hard cases (`data.hard_share=0`)", "add10", ("data.hard_share=0", *QUIET), SEEDS),
    Variant("uniform 10-digit operands (`data.mixed_lengths=0 data.round_numbers=0`)", "add10",
            ("data.mixed_lengths=0", "data.round_numbers=0", *QUIET), SEEDS),
]  # fmt: skip
AS_CONFIGURED = "`experiment=add10` as configured"


def measure(scratch: Path) -> dict:
    """experiment=add10 with one part of its recipe taken out at a time, seeds 0-2 (two at a time, one thread
    each), and python verify.py on every run: what each part is for."""
    return {"command": COMMAND, "runs": run_variants(scratch, "add10_recipe", CHANGES, verified(scratch))}


def groups_of(m: dict) -> dict[str, list[dict]]:
    """add10 as configured (the add10 section's runs on this section's seeds), then each part of its recipe taken
    out: {label: runs}, in that order; {} when either section is not measured."""
    x, whole = m.get("add10_recipe"), m.get("add10")
    if not x or not whole:
        return {}
    seeds = {r["seed"] for r in x["runs"]}
    groups = {AS_CONFIGURED: [r for r in whole["runs"] if r["seed"] in seeds]}
    for r in x["runs"]:
        groups.setdefault(r["variant"], []).append(r)
    return groups


def block_add10_recipe(m: dict) -> str:
    """add10 as configured (its seeds 0-2) against each part of its recipe taken out, seed by seed."""
    groups = groups_of(m)
    if not groups:
        return not_measured("add10_recipe" if not m.get("add10_recipe") else "add10")
    lines = [
        "| recipe | seed | steps to 100% val | test exact-match | random pairs | edge cases | verify.py |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, runs in groups.items():
        for r in runs:
            v = Verified.of(r["verify"], named=3)
            lines.append(
                f"| {label} | {r['seed']} | {reached(r, 'steps_to_100')} | {pct(r['test_exact_match'])} | "
                f"{v.pairs} | {v.edges} | {v.verdict} |"
            )
    return "\n".join(lines)


def block_add10_recipe_summary(m: dict) -> str:
    """One sentence: add10 with each part of its recipe taken out, seeds 0-2."""
    groups = groups_of(m)
    if not groups:
        return not_measured("add10_recipe" if not m.get("add10_recipe") else "add10")
    parts = []
    for label, runs in groups.items():
        name = "as configured" if label == AS_CONFIGURED else label.split(" (")[0]  # the label without its command
        steps = " / ".join(reached(r, "steps_to_100") for r in runs)
        passed = sum(r["verify"]["passed"] for r in runs)
        parts.append(f"{name}: steps to 100% validation {steps}, verify.py passed by {passed} of {len(runs)}")
    seeds = " / ".join(str(r["seed"]) for r in groups[AS_CONFIGURED])
    return f"seeds {seeds}, " + "; ".join(parts)


BLOCKS = {"add10_recipe": block_add10_recipe, "add10_recipe_summary": block_add10_recipe_summary}
