"""Division with remainder: ``experiment=div3`` with one change taken out at a time (seed 0), its recipe on seeds 0-2,
and ``experiment=mixed4`` (seed 0): steps, seconds, test exact-match, and where the mistakes are."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .common import Variant, not_measured, pct, reached, run_variants

COMMAND = (
    "python train.py experiment=div3 [data.show_work=false | optim.decay_steps=300 | data.batch_size=256] "
    "seed=S threads=1"
)
COST = "~75 min"
QUIET = ("logger=csv", "analysis=none")  # the score is the test's; the analyses are the default run's to show
RUNS = [  # docs/arithmetic.md "Division with remainder": the recipe on its seeds, then one change taken out at a time
    Variant("`div3`: long division's steps, batches of 512, the cosine decay over the whole run", "div3", QUIET,
            (0, 1, 2)),
    Variant("the answer alone (`data.show_work=false`)", "div3", ("data.show_work=false", *QUIET)),
    Variant("the learning rate decayed at step 300, as the default run's (`optim.decay_steps=300`)", "div3",
            ("optim.decay_steps=300", *QUIET)),
    Variant("batches of 256, as the other operators' (`data.batch_size=256`)", "div3", ("data.batch_size=256", *QUIET)),
    Variant("`mixed4`: `mixed` with `/`, each division's steps beside the products' working", "mixed4", QUIET),
]  # fmt: skip


def one_digit_off_by_one(model: str | None, truth: str) -> bool:
    """Whether a division's written quotient differs from the true one in one digit, by one (``"89 r 2"``, "79 r 2")."""
    if not isinstance(model, str) or " r " not in model:
        return False
    q, t = (s.split(" r ")[0].zfill(9) for s in (model, truth))
    gaps = [abs(int(a) - int(b)) for a, b in zip(q, t, strict=True) if a != b]
    return gaps == [1]


def mistakes(job: Path, results: dict) -> dict:
    """The test's recorded mistakes (the first 50): how many are divisions, and how many of those have one digit of
    the quotient wrong by one."""
    found = json.loads((job / "test_mistakes.json").read_text())
    load = os.getloadavg()[0]  # the machine's 1-minute load as the run ended: 2 is both cores busy (two runs at a time)
    divisions = [m for m in found["mistakes"] if "/" in m["problem"]]
    return {
        "n_mistakes": found["n_mistakes"], "recorded_divisions": len(divisions),
        "quotient_digit_off_by_one": sum(one_digit_off_by_one(m["model"], m["truth"]) for m in divisions),
        "examples": [f"{m['problem']} = {m['truth']}, written {m['model']}" for m in divisions[:3]], "load": load,
    }  # fmt: skip


def measure(scratch: Path) -> dict:
    """div3 with one change taken out at a time (seed 0), its recipe on seeds 0-2, mixed4 (seed 0; two at a time,
    one thread each): steps, seconds, test exact-match and the mistakes."""
    return {"command": COMMAND, "runs": run_variants(scratch, "division", RUNS, mistakes)}


def block_division(m: dict) -> str:
    """One row per run: the recipe, seed, steps, seconds, load, steps to 99% validation, test exact-match, mistakes."""
    x = m.get("division")
    if not x:
        return not_measured("division")
    lines = [
        "| recipe | seed | steps | train s | load | steps to 99% val | test exact-match "
        "| of the first 50 wrong divisions: one quotient digit off by one |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in x["runs"]:
        one = f"{r['quotient_digit_off_by_one']} of {r['recorded_divisions']}" if r["recorded_divisions"] else "—"
        lines.append(
            f"| {r['variant']} | {r['seed']} | {r['steps']:,} | {r['train_seconds']:.0f} | {r['load']:.1f} "
            f"| {reached(r, 'steps_to_99')} | {pct(r['test_exact_match'])} | {one} |"
        )
    return "\n".join(lines)


BLOCKS = {"division": block_division}
