"""``python bench.py lab`` on the default run: how quickly the lab in its page answers a typed problem."""

from __future__ import annotations

from pathlib import Path

from .common import RUN, bench, not_measured
from .default import default_run

COMMAND = f"python bench.py lab --ckpt {RUN} --n 200"
COST = "~30 s (+1 min without the default section; needs Chromium)"


def measure(scratch: Path) -> dict:
    """python bench.py lab on the default run: keystroke to answer and maps in headless Chromium, and page size."""
    run_dir = default_run(scratch)
    return {"command": COMMAND} | bench(scratch, "lab", "--ckpt", str(run_dir), "--n", "200")["lab"]


def block_lab(m: dict) -> str:
    x = m.get("lab")
    if not x:
        return not_measured("lab")
    return "\n".join(
        [
            f"`{x['command']}` ({x['problems']} problems typed into the lab one after another, headless Chromium; "
            "each time from the keystroke to the answer, its probabilities and every head's map drawn):",
            "",
            "| model | median | 90th percentile | slowest | the lab's page |",
            "|---|---|---|---|---|",
            f"| {x['model']} | {x['median_ms']:.1f} ms | {x['p90_ms']:.1f} ms | {x['max_ms']:.1f} ms | "
            f"{x['page_bytes'] / 1e6:.2f} MB |",
        ]
    )


BLOCKS = {"lab": block_lab}
