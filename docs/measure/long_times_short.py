"""A long number times a short one: ``experiment=mul_n1`` (N x 1) on seeds 0-2, trained on a of at most 9 digits;
exact-match by a's length to 1,000 digits (the length analysis), one setting taken out at a time on seed 0, and N x 2
(``data.b_digits=2``) on seed 0."""

from __future__ import annotations

from pathlib import Path

from .common import Variant, not_measured, run_variants, secs
from .length import ours_row, seconds_by_length, width_cells, width_head

COMMAND = "python train.py experiment=mul_n1 seed=S threads=1"
COST = "~45 min"
RUNS = [Variant("N x 1", "mul_n1", seeds=(0, 1, 2))]
OPTIONS = [  # what made the difference: one setting taken out, seed 0; and N x 2 as far as it goes
    Variant("N x 1, b not anchored (`model.place_of=predicted`: b's digits only within the window)", "mul_n1",
            ("model.place_of=predicted",)),
    Variant("N x 1, no hard cases (`data.hard_share=0`)", "mul_n1", ("data.hard_share=0",)),
    Variant("N x 2 (`data.b_digits=2 model.place_bias=2`)", "mul_n1", ("data.b_digits=2", "model.place_bias=2")),
]  # fmt: skip
WIDTHS = (9, 20, 50, 100, 200, 500, 1000)  # a's digits the table shows
TRAINED = 9
PUBLISHED = (  # the longest length right against the trained one, as each paper reports it
    ("N x 2, position coupling (Cho et al. 2024)", 40, 100),
    ("N x 3 with priming (Jelassi et al. 2023)", 5, 35),
)


def measure_runs(scratch: Path, section: str, command: str, variants: list[Variant]) -> dict:
    """A long-times-short section's runs: each variant on its seeds (two runs at a time), with steps, training
    seconds, exact-match by length and the seconds each length took."""

    def seconds(out: Path, _results: dict) -> dict:
        return {"seconds_by_length": seconds_by_length(out)}

    return {"command": command, "runs": run_variants(scratch, section, variants, seconds)}


def measure(scratch: Path) -> dict:
    """Each experiment on seeds 0-2, then each option on seed 0: exact-match by a's length to 1,000 digits."""
    return measure_runs(scratch, "long_times_short", COMMAND, RUNS + OPTIONS)


def curve(run: dict) -> dict:
    """A run's exact-match by a's length, of its one operator."""
    return next(iter(run["length"].values()), {})


def runs_table(x: dict, widths=WIDTHS) -> str:
    """Each run of a long-times-short section, one row: its steps, training time and exact-match by a's length."""
    lines = [f"| task | seed | steps | training | {width_head(widths)} |", "|---|---|---|---|" + "---|" * len(widths)]
    for r in x["runs"]:
        cells = width_cells(curve(r), widths)
        lines.append(f"| {r['variant']} | {r['seed']} | {r['steps']:,} | {secs(r['train_seconds'])} | {cells} |")
    return "\n".join(lines)


def published_table(x: dict, experiment: str, published, what: str, trained: int = TRAINED) -> str:
    """Trained length against the longest right (every measured length >= 99%), ours (``experiment``'s seeds, not
    the options) beside the published."""
    lines = ["| method | trained on | right up to | ratio |", "|---|---|---|---|"]
    for method, theirs, reached in published:
        lines.append(f"| {method} | {theirs} digits | {reached} digits | {reached / theirs:.1f}x |")
    runs = [r for r in x["runs"] if r["command"] == f"python train.py experiment={experiment}"]
    lines.append(ours_row(experiment, runs, [curve(r) for r in runs], trained, what=what))
    return "\n".join(lines)


def block_long_times_short(m: dict) -> str:
    x = m.get("long_times_short")
    return runs_table(x) if x else not_measured("long_times_short")


def block_long_times_short_published(m: dict) -> str:
    x = m.get("long_times_short")
    return published_table(x, "mul_n1", PUBLISHED, ", N x 1") if x else not_measured("long_times_short")


BLOCKS = {"long_times_short": block_long_times_short, "long_times_short_published": block_long_times_short_published}
