"""Why the answer is written reversed: reversed against ``experiment=plain_answer``, 3 digits on seeds 0-2 and 5 digits
on seed 0 (the AdamW recipe, validation every 100 steps)."""

from __future__ import annotations

from pathlib import Path

from .common import Variant, not_measured, pct, reached, run_variants

RECIPE = ("optim=adamw", "trainer.val_check_interval=100", "analysis=none", "logger=none")
FIVE_DIGITS = ("data.digits=5", "trainer.max_steps=2000", "target_accuracy=null")
COMMAND = "python train.py [experiment=plain_answer] seed=S " + " ".join(RECIPE)
COST = "~6 min"
RUNS = [  # label: "task | answer written"
    Variant("3 digits | reversed (default)", None, RECIPE, (0, 1, 2)),
    Variant("3 digits | plain", "plain_answer", RECIPE, (0, 1, 2)),
    Variant("5 digits, 2,000 steps | reversed (default)", None, (*RECIPE, *FIVE_DIGITS)),
    Variant("5 digits, 2,000 steps | plain", "plain_answer", (*RECIPE, *FIVE_DIGITS)),
]


def measure(scratch: Path) -> dict:
    """The answer reversed against written plainly, 3 digits on seeds 0-2 and 5 digits on seed 0 (AdamW recipe,
    validation every 100 steps): steps to 99% and 100% validation exact-match, test exact-match."""
    return {"command": COMMAND, "runs": run_variants(scratch, "answer_order", RUNS)}


def block_answer_order(m: dict) -> str:
    x = m.get("answer_order")
    if not x:
        return not_measured("answer_order")
    lines = [
        "| task | answer written | seed | steps to 99% val | steps to 100% val | test exact-match |",
        "|---|---|---|---|---|---|",
    ]
    groups: dict[str, list[dict]] = {}
    for r in x["runs"]:
        groups.setdefault(r["variant"], []).append(r)
    for label, runs in groups.items():
        task, answer = label.split(" | ")
        cells = [" / ".join(f(r) for r in runs) for f in (
            lambda r: str(r["seed"]), lambda r: reached(r, "steps_to_99"), lambda r: reached(r, "steps_to_100"),
            lambda r: pct(r["test_exact_match"]))]  # fmt: skip
        lines.append(f"| {task} | {answer} | " + " | ".join(cells) + " |")
    pairs = [
        (r, p) for r in x["runs"] for p in x["runs"]
        if "reversed" in r["variant"] and p["variant"] == r["variant"].replace("reversed (default)", "plain")
        and p["seed"] == r["seed"]
    ]  # fmt: skip
    at = lambda r: r["steps_to_100"] if r["steps_to_100"] is not None else float("inf")  # noqa: E731
    sooner = sum(at(r) <= at(p) for r, p in pairs)
    never = [sum(run["steps_to_100"] is None for run in side) for side in zip(*pairs, strict=True)] or [0, 0]
    lines += ["", f"Reversed reached 100% validation as soon as or sooner than plain in {sooner} of {len(pairs)} "
              f"pairs; runs that never reached it: {never[0]} reversed, {never[1]} plain."]  # fmt: skip
    return "\n".join(lines)


BLOCKS = {"answer_order": block_answer_order}
