"""``python -m benchmarks.recipe_search``: steps to every validation problem right for the default recipe and its
neighbours, seeds 0-4 (one thread, validation every 25 steps)."""

from __future__ import annotations

import json
from pathlib import Path

from .common import not_measured, pct, run

SEEDS = "0,1,2,3,4"
COMMAND = f'python -m benchmarks.recipe_search --seeds {SEEDS} "threads=1 <overrides>" ...'
COST = "~16 min"
UNIFORM = "data.hard_share=0.0 data.hard_fade_steps=0"  # batches without hard cases
RECIPES = [  # (label, overrides on the default config); the first is the default recipe
    ("**default**: Muon 0.02 + AdamW 3e-3, warm-up 50, cosine to step 300; batches of 128, half hard at step 0 "
     "fading by step 300; stopped at every validation problem right and a loss under 0.01", ""),
    ("the same, stopped at the first perfect validation (`target_loss=null`)", "target_loss=null"),
    ("batches of 128 without hard cases", UNIFORM),
    ("batches of 256 without hard cases, stopped at the first perfect validation",
     f"data.batch_size=256 {UNIFORM} target_loss=null"),
    ("the default, cosine to step 400", "optim.decay_steps=400"),
    ("the default, Muon 0.03", "optim.muon_lr=0.03"),
    ("AdamW alone, lr 1e-2, warm-up 30, cosine to 400, batches of 256 without hard cases",
     f"optim=adamw optim.lr=1e-2 optim.warmup_steps=30 optim.decay_steps=400 data.batch_size=256 {UNIFORM}"),
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
