"""``python train.py -m experiment=head_sweep seed=0,1``: 1 to 16 heads, 1,500 steps each, two seeds."""

from __future__ import annotations

from pathlib import Path

from .common import image, not_measured, train
from .quick_sweep import sweep_rows, sweep_table

COMMAND = "python train.py -m experiment=head_sweep seed=0,1"
COST = "~10 min"
DRAWS = {"head_sweep.png": ["analysis/plots.py", "analysis/sweep.py"]}


def measure(scratch: Path) -> dict:
    """python train.py -m experiment=head_sweep seed=0,1: 1-16 heads, 1,500 steps each, two seeds."""
    ran = train(scratch, "-m", "experiment=head_sweep", "seed=0,1", "hydra.sweep.dir=multirun/heads")
    sweep = scratch / "multirun/heads"
    images: dict[str, str] = {}
    image(images, sweep / "sweep_summary.png", "head_sweep.png", DRAWS["head_sweep.png"])
    return {"command": COMMAND, "whole_seconds": ran.seconds, "rows": sweep_rows(sweep), "images": images}


def block_head_sweep(m: dict) -> str:
    h = m.get("head_sweep")
    if not h:
        return not_measured("head_sweep")
    return "\n".join(
        [
            f"`{h['command']}` (1,500 steps each, no early stop):",
            "",
            *sweep_table(h["rows"], True),
            "",
            "![head sweep: learning curves and final accuracy](images/head_sweep.png)",
        ]
    )


BLOCKS = {"head_sweep": block_head_sweep}
