"""Other seeds of the default config, ``python train.py -m seed=1,2,3,4``: how many steps each needs. Its row is the
second of the Results table (default.py renders the table; ``seeds_row`` is this section's part of it)."""

from __future__ import annotations

from pathlib import Path

from .common import finished_jobs, pct, results, train

COMMAND = "python train.py -m seed=1,2,3,4"
COST = "~3 min"


def measure(scratch: Path) -> dict:
    """python train.py -m seed=1,2,3,4: how many steps other seeds need."""
    train(scratch, "-m", "seed=1,2,3,4", "hydra.sweep.dir=multirun/seeds")
    rows = []
    for job in finished_jobs(scratch / "multirun/seeds"):
        r = results(job)
        rows.append({k: r[k] for k in ("seed", "steps", "train_seconds", "total_seconds", "test_exact_match")})
    return {"command": COMMAND, "runs": sorted(rows, key=lambda r: r["seed"])}


def seeds_row(s: dict, n_params: int) -> str:
    """The Results table's row of the other seeds."""
    runs = s["runs"]
    steps = " / ".join(f"{r['steps']:,}" for r in runs)
    train_s = " / ".join(f"{r['train_seconds']:.1f}" for r in runs)
    total_s = " / ".join(f"{r['total_seconds']:.0f}" for r in runs)
    exact = " / ".join(pct(r["test_exact_match"]) for r in runs)
    return f"| `{s['command']}` | {n_params:,} | {steps} | {train_s} | {total_s} (in process) | {exact} |"


BLOCKS: dict = {}  # its figures are a row of default.py's "results" block (seeds_row)
