"""A long number divided by a short one: ``experiment=div_n1`` (N / 1) and ``experiment=div_n2`` (N / 2) on seeds
0-2, trained on a of at most 9 digits, and div_n1 without its tokens' roles on seed 0; exact-match by a's
length to 1,000 digits (the length analysis, the hard divisions asked first)."""

from __future__ import annotations

from pathlib import Path

from .common import Variant, not_measured
from .length import ours_row
from .long_times_short import curve, measure_runs, runs_table

COMMAND = "python train.py experiment=div_n1 seed=S threads=1 (and experiment=div_n2)"
COST = "~100 min"
RUNS = [  # the longest first: two run at a time
    Variant("N / 2", "div_n2", seeds=(0, 1, 2)),
    Variant("N / 1", "div_n1", seeds=(0, 1, 2)),
    Variant("N / 1 without the roles (model.place_of=anchored)", "div_n1", ("model.place_of=anchored",)),
]
WIDTHS = (9, 20, 50, 100, 200, 500, 1000)  # a's digits the table shows
TRAINED = 9
PUBLISHED = (  # what each reports of division beyond the trained length
    "| Goat (Liu & Low 2023): LLaMA-7B fine-tuned, long division's working written out | the lengths it is tested "
    "on | no length beyond them reported | - |",
    "| MathGLM (Yang et al. 2023): a 2B model trained from scratch | division among its operators | no length "
    "figures | - |",
)


def measure(scratch: Path) -> dict:
    """Each experiment on its seeds: exact-match by a's length to 1,000 digits."""
    return measure_runs(scratch, "long_division", COMMAND, RUNS)


def block_long_division(m: dict) -> str:
    x = m.get("long_division")
    return runs_table(x, WIDTHS) if x else not_measured("long_division")


def block_long_division_published(m: dict) -> str:
    x = m.get("long_division")
    if not x:
        return not_measured("long_division")
    lines = ["| method | trained on | right up to | ratio |", "|---|---|---|---|", *PUBLISHED]
    for experiment, what in (("div_n1", ", N / 1"), ("div_n2", ", N / 2")):
        runs = [r for r in x["runs"] if r["command"] == f"python train.py experiment={experiment}"]
        if runs:
            lines.append(ours_row(experiment, runs, [curve(r) for r in runs], TRAINED, what=what))
    return "\n".join(lines)


BLOCKS = {"long_division": block_long_division, "long_division_published": block_long_division_published}
