"""``experiment=add_length``'s options one at a time (seed 0): exact-match by operand length for each."""

from __future__ import annotations

from pathlib import Path

from .common import Variant, not_measured, run_variants, secs
from .length import width_cells, width_head

COMMAND = "python train.py experiment=add_length seed=0 threads=1 <option>"
COST = "~12 min"
OPTIONS = [  # docs/arithmetic.md's "what made the difference"
    Variant("a window of 4 places (`model.place_bias=4`)", "add_length", ("model.place_bias=4",)),
    Variant("stopped at the first perfect validation (`target_accuracy=0.9999`)", "add_length",
            ("target_accuracy=0.9999",)),
]  # fmt: skip
WIDTHS = (10, 20, 40, 100, 200, 500, 1000)


def measure(scratch: Path) -> dict:
    """experiment=add_length's options one at a time, seed 0: exact-match by length for each."""
    return {"command": COMMAND, "runs": run_variants(scratch, "length_options", OPTIONS)}


def block_length_options(m: dict) -> str:
    x = m.get("length_options")
    if not x:
        return not_measured("length_options")
    head = width_head(WIDTHS)
    lines = [f"| variant | steps | training | {head} |", "|---|---|---|" + "---|" * len(WIDTHS)]
    for r in x["runs"]:
        curve = r["length"].get("+", {})
        cells = width_cells(curve, WIDTHS)
        lines.append(f"| {r['variant']} | {r['steps']:,} | {secs(r['train_seconds'])} | {cells} |")
    return "\n".join(lines)


BLOCKS = {"length_options": block_length_options}
