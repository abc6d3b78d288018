"""The circuits of ``experiment=sub3`` and ``experiment=mul2`` (seed 0): each trained, then ``python analyse.py``."""

from __future__ import annotations

from pathlib import Path

from .circuits import circuit_roles, circuit_table, circuits_of
from .common import Variant, not_measured, pct, run_variants

COMMAND = "python train.py experiment=<name> seed=0 threads=1; python analyse.py <run>"
COST = "~5 min"
QUIET = ("analysis=none", "logger=none")  # analyse.py analyses afterwards
TASKS = [Variant("sub3", "sub3", QUIET), Variant("mul2", "mul2", QUIET)]


def measure(scratch: Path) -> dict:
    """experiment=sub3 and mul2 on seed 0 (two at a time, one thread each), then python analyse.py on each: their
    circuits per digit and the roles they give."""
    runs = run_variants(scratch, "circuits_tasks", TASKS, lambda out, r: circuits_of(scratch, out))
    return {"command": COMMAND, "runs": runs}


def block_circuits_tasks(m: dict) -> str:
    """The circuits of sub3 and mul2 (seed 0), a table and the roles each."""
    x = m.get("circuits_tasks")
    if not x:
        return not_measured("circuits_tasks")
    lines: list[str] = []
    for r in x["runs"]:
        lines += [
            f"**`python train.py experiment={r['variant']}`** (seed 0, {r['n_heads']} heads per layer, "
            f"{r['steps']:,} steps, {pct(r['test_exact_match'])} of the test set):",
            "",
            *circuit_table(r["circuits"]),
            "",
            f"Attribution against exact patching, Pearson r: heads {r['attribution_correlation_heads']:.2f}, edges "
            f"{r['attribution_correlation_edges']:.2f}. Roles from the circuits: {circuit_roles(r)}; the other heads "
            "are in no circuit.",
            "",
        ]
    return "\n".join(lines[:-1])


BLOCKS = {"circuits_tasks": block_circuits_tasks}
