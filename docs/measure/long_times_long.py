"""A long number times a long one: ``experiment=mul_nm`` (N x M with its working, a running product) on seeds 0-2,
trained on a and b of at most 6 digits; exact-match with both operands of each length, as far as 50 x 50 digits
(the length analysis), and the same without lines on seed 0."""

from __future__ import annotations

from pathlib import Path

from .common import Variant, not_measured
from .long_times_short import measure_runs, published_table, runs_table

COMMAND = "python train.py experiment=mul_nm seed=S threads=1"
COST = "~75 min"
RUNS = [Variant("N x M with its working", "mul_nm", seeds=(0, 1, 2))]
OPTIONS = [  # one change taken out at a time, on seed 0
    Variant(
        "N x M, lines ending on their own line (`data.line_end_sees_next=false`)",
        "mul_nm",
        ("data.line_end_sees_next=false",),
    ),
    Variant("N x M, rates decaying to a tenth (`optim.min_lr_ratio=0.1`)", "mul_nm", ("optim.min_lr_ratio=0.1",)),
]
WIDTHS = (6, 9, 12, 20, 30, 50)  # both operands' digits
TRAINED = 6
PUBLISHED = (("N x M, a scratchpad and multi-level coupling (Cho et al. 2025)", 10, 20),)  # about 20 x 15


def measure(scratch: Path) -> dict:
    """The experiment on seeds 0-2, then each option on seed 0: exact-match by both operands' length."""
    return measure_runs(scratch, "long_times_long", COMMAND, RUNS + OPTIONS)


def block_long_times_long(m: dict) -> str:
    x = m.get("long_times_long")
    return runs_table(x, WIDTHS) if x else not_measured("long_times_long")


def block_long_times_long_published(m: dict) -> str:
    x = m.get("long_times_long")
    return published_table(x, "mul_nm", PUBLISHED, ", N x M", TRAINED) if x else not_measured("long_times_long")


def block_long_times_long_best(m: dict) -> str:
    """Per run, the validation whose weights were kept (the best) and its step, against the steps trained."""
    x = m.get("long_times_long")
    if not x:
        return not_measured("long_times_long")
    lines = ["| task | seed | best validation exact-match | at step | of |", "|---|---|---|---|---|"]
    for r in x["runs"]:
        best = f"{r['best_val']:.1%} | {r['best_val_step']:,}"
        lines.append(f"| {r['variant']} | {r['seed']} | {best} | {r['steps']:,} |")
    return "\n".join(lines)


BLOCKS = {
    "long_times_long": block_long_times_long,
    "long_times_long_best": block_long_times_long_best,
    "long_times_long_published": block_long_times_long_published,
}
