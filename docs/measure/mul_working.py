"""2-digit multiplication with and without the working written out (``experiment=mul2`` and ``data.show_work=false``,
seed 0): each model's score on the problems it trained on and on the held-out ones."""

from __future__ import annotations

import json
from pathlib import Path

from data.text import evaluate

from .common import ROOT, Variant, not_measured, pct, rate, run, run_variants

COMMAND = "python train.py experiment=mul2 [data.show_work=false] seed=0 threads=1"
COST = "~12 min"
ALONE = ("data.show_work=false",)
RUNS = [  # docs/arithmetic.md "Before the working"; the first two are mul_summary's
    Variant("`mul2` (with the working)", "mul2"),
    Variant("the product alone (`data.show_work=false`)", "mul2", ALONE),
    Variant("the product alone, `optim.weight_decay=1.0` (grokking-style)", "mul2", (*ALONE, "optim.weight_decay=1.0")),
    Variant("`mixed` trained on 85%, the answer alone", "mixed", ("data.test_fraction=0.1", *ALONE)),
]


def by_split(scratch: Path, job: Path) -> dict:
    """python calc.py --eval on a 2-digit run's trained problems and on its held-out ones (validation and test)
    apart, by operator; and of the held-out '*' problems it gets wrong, how many have their mirror b*a held out."""
    import torch
    from omegaconf import OmegaConf

    from data.problems import ProblemFormat

    data = OmegaConf.load(job / "config.yaml").data
    fmt = ProblemFormat(digits=2, operators=data.operators)
    a, b = (t.flatten() for t in torch.meshgrid(torch.arange(100), torch.arange(100), indexing="ij"))  # (10000,)
    held_out: set[str] = set()
    lines: dict[str, list[str]] = {"trained": [], "held_out": []}
    for i, op in enumerate(fmt.operators):
        split = fmt.split_of(a, torch.full_like(a, i), b, data.val_fraction, data.test_fraction)  # 0 trained
        for x, y, s in zip(a.tolist(), b.tolist(), split.tolist(), strict=True):
            text = f"{x}{op}{y}"
            lines["held_out" if s else "trained"].append(f"{text}={evaluate(x, op, y)}")
            if s:
                held_out.add(text)
    scores = {}
    for part, problems in lines.items():
        path = scratch / f"{job.name}_{part}.txt"
        path.write_text("\n".join(problems) + "\n")
        args = [str(ROOT / "calc.py"), "--ckpt", str(job), "--eval", str(path), "--json", "--show-mistakes", "100000"]
        report = json.loads(run(args, scratch, (0, 1), False).stdout)
        scores[part] = {"right": report["right"], "n": report["n_problems"]} | {
            "by_operator": {op: {"right": v["right"], "n": v["n"]} for op, v in report["by_operator"].items()}
        }
        if part == "held_out":
            wrong = [m["problem"] for m in report["mistakes"] if "*" in m["problem"]]
            mirrored = sum("*".join(reversed(m.split("*"))) in held_out for m in wrong)
            scores[part] |= {"wrong_products": len(wrong), "mirror_held_out": mirrored}
    return scores


def measure(scratch: Path) -> dict:
    """2-digit multiplication with and without the working written out (seed 0, two at a time, one thread each):
    each model's score on the problems it trained on and on the held-out ones."""
    runs = run_variants(scratch, "mul_working", RUNS, lambda out, r: {"by_split": by_split(scratch, out)})
    return {"command": COMMAND, "runs": runs}


def right_of(score: dict) -> str:
    return f"{score['right']:,} / {score['n']:,} ({pct(rate(score), 1)})"


def block_mul_working(m: dict) -> str:
    """2-digit multiplication with and without the working: trained against held-out problems right."""
    x = m.get("mul_working")
    if not x:
        return not_measured("mul_working")
    lines = [
        "| model (seed 0) | steps | test exact-match | trained problems right | held-out problems right |",
        "|---|---|---|---|---|",
    ]
    for r in x["runs"]:
        split = r["by_split"]
        lines.append(
            f"| {r['variant']} | {r['steps']:,} | {pct(r['test_exact_match'])} | {right_of(split['trained'])} | "
            f"{right_of(split['held_out'])} |"
        )
    notes = []
    alone = x["runs"][1]["by_split"]["held_out"]  # RUNS' second row: the product alone
    if alone["wrong_products"]:
        notes.append(
            f"Of the {alone['wrong_products']:,} held-out products the product-alone model gets wrong, "
            f"{alone['mirror_held_out']:,} have their mirror `b*a` held out too."
        )
    for r in x["runs"]:
        held = r["by_split"]["held_out"]
        if len(held["by_operator"]) > 1:
            ops = ", ".join(f"`{op}` {pct(rate(s), 1)}" for op, s in held["by_operator"].items())
            notes.append(f"{r['variant']}, held-out problems by operator: {ops}.")
    return "\n".join([*lines, *(["", " ".join(notes)] if notes else [])])


def block_mul_summary(m: dict) -> str:
    """One clause: mul2 with and without the working, trained against held-out problems."""
    x = m.get("mul_working")
    if not x:
        return not_measured("mul_working")
    with_work, alone = x["runs"][0]["by_split"], x["runs"][1]["by_split"]  # RUNS' first two rows
    memorised = " — it memorises" if rate(alone["trained"]) - rate(alone["held_out"]) > 0.02 else ""
    return (
        f"asked for the product directly, `mul2` (seed 0) gets {pct(rate(alone['trained']), 1)} of the problems it "
        f"trained on right and {pct(rate(alone['held_out']), 1)} of the held-out ones{memorised}; with the working "
        f"{pct(rate(with_work['trained']), 1)} and {pct(rate(with_work['held_out']), 1)}"
    )


BLOCKS = {"mul_working": block_mul_working, "mul_summary": block_mul_summary}
