"""``python -m benchmarks.recipe_search``: steps to every validation problem right for the default recipe and its
neighbours, seeds 0-4 (one thread, validation every 25 steps)."""

from __future__ import annotations

import json
from pathlib import Path

from .common import not_measured, pct, run

SEEDS = "0,1,2,3,4"
COMMAND = f'python -m benchmarks.recipe_search --seeds {SEEDS} "threads=1 <overrides>" ...'
COST = "~16 min"
HARD = "data.hard_share=0.5 data.hard_fade_steps=300"  # as experiment=add10_speedrun draws them
LOSS_STOP = (  # stop when the validation loss is under a threshold (as add10_speedrun does), not at 100% exact-match
    "target_accuracy=null callbacks.early_stopping.monitor=val/loss callbacks.early_stopping.mode=min "
    "callbacks.early_stopping.stopping_threshold"
)
RECIPES = [  # (label, overrides on the default config); the first is the default recipe
    ("**default**: Muon 0.02 + AdamW 3e-3, warm-up 50, cosine to step 300", ""),
    ("the same, cosine to step 400", "optim.decay_steps=400"),
    ("Muon 0.03, cosine to 300", "optim.muon_lr=0.03"),
    ("AdamW 6e-3 beside Muon 0.02, cosine to 300", "optim.lr=6e-3"),
    ("AdamW alone, lr 1e-2, warm-up 30, cosine to 400",
     "optim=adamw optim.lr=1e-2 optim.warmup_steps=30 optim.decay_steps=400"),
    ("batches of 128, half of them hard cases at step 0, fading by step 300",
     f"data.batch_size=128 {HARD}"),
    ("the same, stopped at a validation loss under 0.01 instead",
     f"data.batch_size=128 {HARD} {LOSS_STOP}=0.01"),
]  # fmt: skip


def measure(scratch: Path) -> dict:
    """python -m benchmarks.recipe_search (one thread, validation every 25 steps): steps to every validation problem
    right for the default recipe and its neighbours, seeds 0-4."""
    recipes = [f"threads=1 {overrides}".strip() for _, overrides in RECIPES]
    args = ["-m", "benchmarks.recipe_search", "--seeds", SEEDS, "--json", *recipes]
    found = json.loads(run(args, scratch, merged=False).stdout)
    for (label, _), row in zip(RECIPES, found, strict=True):
        row["label"] = label
    return {"command": COMMAND, "recipes": found}


def block_recipe_search(m: dict) -> str:
    """Steps to every validation problem right per seed, for the default recipe and its neighbours."""
    x = m.get("recipe_search")
    if not x:
        return not_measured("recipe_search")
    seeds = [r["seed"] for r in x["recipes"][0]["runs"]]
    lines = [
        "| recipe | " + " | ".join(f"seed {s}" for s in seeds) + " | worst | lowest test exact-match |",
        "|---|" + "---|" * len(seeds) + "---|---|",
    ]
    for row in x["recipes"]:
        steps = " | ".join(f"{r['steps']:,}" if r["steps"] is not None else "missed" for r in row["runs"])
        worst = f"{row['max_steps']:,}" if row["max_steps"] is not None else "—"
        lines.append(f"| {row['label']} | {steps} | {worst} | {pct(row['min_test_exact_match'])} |")
    return "\n".join(lines)


BLOCKS = {"recipe_search": block_recipe_search}
