"""A long number times a two-digit one: ``experiment=mul_n2`` (N x 2 with its working) on seeds 0-2, trained on a
of at most 9 digits; exact-match by a's length to 1,000 digits (the length analysis), and the same without the
working on seed 0."""

from __future__ import annotations

from pathlib import Path

from .common import Variant, not_measured
from .long_times_short import PUBLISHED, measure_runs, published_table, runs_table

COMMAND = "python train.py experiment=mul_n2 seed=S threads=1"
COST = "~60 min"
RUNS = [Variant("N x 2 with its working", "mul_n2", seeds=(0, 1, 2))]
OPTIONS = [  # one change taken out at a time, on seed 0
    Variant("N x 2 without it (`data.show_work=false`)", "mul_n2", ("data.show_work=false",)),
    Variant("N x 2, rates decaying to a tenth (`optim.min_lr_ratio=0.1`)", "mul_n2", ("optim.min_lr_ratio=0.1",)),
    Variant(
        "N x 2 in 3,000 steps (`trainer.max_steps=3000 data.hard_fade_steps=3000`)",
        "mul_n2",
        ("trainer.max_steps=3000", "data.hard_fade_steps=3000"),
    ),
]


def measure(scratch: Path) -> dict:
    """The experiment on seeds 0-2, then each option on seed 0: exact-match by a's length to 1,000 digits."""
    return measure_runs(scratch, "long_times_two", COMMAND, RUNS + OPTIONS)


def block_long_times_two(m: dict) -> str:
    x = m.get("long_times_two")
    return runs_table(x) if x else not_measured("long_times_two")


def block_long_times_two_published(m: dict) -> str:
    x = m.get("long_times_two")
    return published_table(x, "mul_n2", PUBLISHED, ", N x 2") if x else not_measured("long_times_two")


BLOCKS = {"long_times_two": block_long_times_two, "long_times_two_published": block_long_times_two_published}
