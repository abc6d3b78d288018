"""Every task of the Arithmetic table as one command, ``python train.py experiment=<name> seed=S threads=1``, two at a
time; the 2-digit tasks also scored over their whole problem space (add10's row is the add10 section's)."""

from __future__ import annotations

import json
import operator
from pathlib import Path

from .add10 import TASK as ADD10_TASK
from .common import ROOT, Variant, not_measured, pct, run, run_variants, secs

COMMAND = "python train.py experiment=<name> seed=<s> threads=1, two at a time"
COST = "~40 min"
SEEDS = (0, 1, 2)
TASKS = [  # (variant, what the task is), longest first
    (Variant("mul3", "mul3", (), SEEDS), "3-digit `*` (104,000 parameters)"),
    (Variant("mixed", "mixed", (), SEEDS), "2-digit `+-*`, trained on 61% of the space"),
    (Variant("mixed", "mixed", ("data.test_fraction=0.1",), SEEDS), "2-digit `+-*`, trained on 85%"),
    (Variant("sub3", "sub3", (), SEEDS), "3-digit `-`, negative answers too"),
    (Variant("mul2", "mul2", (), SEEDS), "2-digit `*`"),
]
ROW = ("seed", "steps", "capped", "whole_seconds", "test_exact_match", "n_test", "whole_space")  # a run, as stored


def whole_space(scratch: Path, job: Path, operators: str) -> dict:
    """python calc.py --eval on every problem of a 2-digit task's space (training problems included)."""
    ops = list(operators)
    value = {"+": operator.add, "-": operator.sub, "*": operator.mul}
    lines = [f"{a}{op}{b}={value[op](a, b)}" for op in ops for a in range(100) for b in range(100)]
    problems = scratch / f"space_{''.join(ops)}.txt"
    problems.write_text("\n".join(lines) + "\n")
    ran = run([str(ROOT / "calc.py"), "--ckpt", str(job), "--eval", str(problems), "--json"], scratch, (0, 1), False)
    report = json.loads(ran.stdout)
    return {"right": report["right"], "n": report["n_problems"]}


def measure(scratch: Path) -> dict:
    """Every experiment of the Arithmetic table on its seeds, two whole train.py commands at a time, one thread
    each; the 2-digit tasks also over their whole problem space."""
    from omegaconf import OmegaConf

    def capped_and_space(out: Path, r: dict) -> dict:
        config = OmegaConf.load(out / "config.yaml")
        found = {"capped": r["steps"] >= config.trainer.max_steps, "n_test": r["n_test"]}
        if config.data.digits == 2:
            found["whole_space"] = whole_space(scratch, out, config.data.operators)
        return found

    runs = run_variants(scratch, "arithmetic", [v for v, _ in TASKS], capped_and_space)
    rows, start = [], 0
    for variant, task in TASKS:
        mine, start = runs[start : start + len(variant.seeds)], start + len(variant.seeds)
        rows.append(
            {
                "experiment": variant.experiment,
                "overrides": list(variant.overrides),
                "task": task,
                "runs": [{k: r[k] for k in ROW if k in r} for r in mine],
            }
        )
    return {"command": COMMAND, "rows": rows}


def block_arithmetic(m: dict) -> str:
    a = m.get("arithmetic")
    if not a:
        return not_measured("arithmetic")
    lines = ["| experiment | task | seed | steps | whole command | test exact-match |", "|---|---|---|---|---|---|"]
    add10 = m.get("add10")
    rows = [{"experiment": "add10", "overrides": [], "task": ADD10_TASK, "runs": add10["runs"]}] if add10 else []
    for row in rows + [row for row in a["rows"] if row["experiment"] != "add10" or not add10]:
        runs = row["runs"]
        name = " ".join([f"`{row['experiment']}", *row["overrides"]]) + "`"
        seeds = " / ".join(str(r["seed"]) for r in runs)
        steps = " / ".join(f"{r['steps']:,}" + (" (the cap)" if r.get("capped") else "") for r in runs)
        seconds = " / ".join(secs(r["whole_seconds"]) for r in runs)
        exact = [pct(r["test_exact_match"]) for r in runs]
        sizes = {r["n_test"] for r in runs}
        every = len(set(exact)) == 1
        score = f"**{exact[0] if every else ' / '.join(exact)}**" + (f" of {sizes.pop():,}" if len(sizes) == 1 else "")
        score += " on every seed" if every else ""
        spaces = [r["whole_space"] for r in runs if "whole_space" in r]
        if spaces:
            right = " / ".join(f"{space['right']:,}" for space in spaces)
            score += f" (whole space: {right} of {spaces[0]['n']:,})"
        lines.append(f"| {name} | {row['task']} | {seeds} | {steps} | {seconds} | {score} |")
    return "\n".join(lines)


BLOCKS = {"arithmetic": block_arithmetic}
