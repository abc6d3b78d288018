"""10-digit addition, ``experiment=add10`` on seeds 0-4, and ``python verify.py`` on every run: the Arithmetic table's
first row and the verification verdicts. ``Verified`` and ``verified`` serve add10_recipe.py too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .common import Variant, not_measured, pct, rate, run_variants, verify

COMMAND = "python train.py experiment=add10 seed=S threads=1; python verify.py <run>"
COST = "~15 min"
TASK = "10-digit `+` (8 heads of 8 dims; operands of every length, round numbers)"  # its Arithmetic row


def verified(scratch: Path) -> Callable[[Path, dict], dict]:
    """run_variants' ``extra`` for runs that are verified: verify.py's verdict, and the test set's size."""
    return lambda out, r: {"verify": verify(out, scratch), "n_test": r["n_test"]}


def measure(scratch: Path) -> dict:
    """experiment=add10 on seeds 0-4 (two whole commands at a time, one thread each), and python verify.py on
    every run: the Arithmetic table's first row and the verification verdicts."""
    runs = run_variants(scratch, "add10", [Variant("add10", "add10", seeds=(0, 1, 2, 3, 4))], verified(scratch))
    return {"command": COMMAND, "runs": runs}


@dataclass
class Verified:
    """verify.py's verdict on one run, as the tables show it."""

    pairs: str  # the random pairs' exact-match
    edges: str  # edge cases right, of all
    verdict: str  # pass, or the first edge cases it fails

    @classmethod
    def of(cls, v: dict, named: int = 5) -> Verified:
        pairs = v["suites"]["random pairs"]
        edges = [suite for name, suite in v["suites"].items() if name != "random pairs"]
        right, n = sum(e["right"] for e in edges), sum(e["n"] for e in edges)
        failures = ", ".join(f"`{p}`" for p in sorted({f["problem"] for e in edges for f in e["failures"]})[:named])
        verdict = "pass" if v["passed"] else f"fails {failures}" if failures else "fails the random pairs"
        return cls(pct(rate(pairs)), f"{right:,} / {n:,}", verdict)


def block_add10_verify(m: dict) -> str:
    """The verification verdict of each add10 run, with the problems a failing one gets wrong."""
    x = m.get("add10")
    if not x:
        return not_measured("add10")
    lines = ["| seed | steps | random pairs | edge cases | verdict |", "|---|---|---|---|---|"]
    for r in x["runs"]:
        v = Verified.of(r["verify"])
        lines.append(f"| {r['seed']} | {r['steps']:,} | {v.pairs} | {v.edges} | {v.verdict} |")
    return "\n".join(lines)


def block_add10_verdict(m: dict) -> str:
    """One sentence: which add10 seeds pass verify.py, and what the others get wrong."""
    x = m.get("add10")
    if not x:
        return not_measured("add10")
    runs = x["runs"]
    passed = [str(r["seed"]) for r in runs if r["verify"]["passed"]]
    failed = [r for r in runs if not r["verify"]["passed"]]
    if not failed:
        return f"every seed passes, every random pair and every edge case right on all {len(runs)}"
    named = "; ".join(
        f"seed {r['seed']} fails "
        + ", ".join(f"`{f['problem']}`" for suite in r["verify"]["suites"].values() for f in suite["failures"][:3])
        for r in failed
    )
    return f"seeds {', '.join(passed) or 'none'} pass; {named}"


BLOCKS = {"add10_verify": block_add10_verify, "add10_verdict": block_add10_verdict}
