"""Steps to target for training recipes, seed by seed: the search behind the default recipe.

    python -m benchmarks.recipe_search --seeds 0,1,2,3,4 "optim=adamw" "optim=muon optim.muon_lr=0.03" [--json]

Each recipe is a string of train.py overrides. Every (recipe, seed) is trained in this process exactly as
``train.py`` builds it (``assemble`` on the composed config: the same data stream, initialisation and
optimizer), with validation every ``--val-every`` steps and the run stopped as the recipe's early stopping says
(the default: at the first validation whose exact-match exceeds ``target_accuracy``, every validation problem
right); no progress bar, attention maps, analysis or logger. Reported per seed: the step it stopped at (None: not
before ``trainer.max_steps``), each validation's exact-match and loss, and the
exact-match on the test set of that model, read off one teacher-forced pass (equal to greedy decoding's, see
``CalculatorModule.forced_scores``). Step counts are deterministic per seed and thread count; seconds are not.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.train_speed import _quiet, compose
from training.assemble import assemble
from training.cli import check_command_line

QUIET = [
    "logger=none",
    "analysis=none",
    "callbacks.attention_maps=null",
    "callbacks.progress_bar=null",
    "+trainer.enable_progress_bar=false",
]


def steps_to_target(overrides: list[str], seed: int, val_every: int, workdir: Path) -> dict:
    """One run of ``overrides`` at ``seed``: the step it reached the target at, and its test exact-match."""
    cfg = compose([*overrides, *QUIET, f"seed={seed}", f"trainer.val_check_interval={val_every}"], workdir)
    datamodule, module, _, _, _, trainer = assemble(cfg)
    started = time.perf_counter()
    with _quiet():
        trainer.fit(module, datamodule=datamodule)
    seconds = time.perf_counter() - started
    reached = trainer.global_step if trainer.global_step < cfg.trainer.max_steps else None  # stopped early: done
    module.eval()
    with torch.no_grad():
        test = datamodule.held_out_set("test").to(module.device)
        right = torch.cat([module.forced_scores(part)[1] for part in test.split(2500)])
    return {
        "seed": seed,
        "steps": reached,
        "last_step": trainer.global_step,
        "test_exact_match": round(right.float().mean().item(), 5),
        "seconds": round(seconds, 1),
        "val": [(v["step"], round(v["exact_match"], 4), round(v["loss"], 5)) for v in module.val_history],
    }


def search(recipes: list[str], seeds: list[int], val_every: int, say=print) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory(prefix="recipe-search-") as tmp:
        for n, recipe in enumerate(recipes):
            runs = []
            for seed in seeds:
                run = steps_to_target(shlex.split(recipe), seed, val_every, Path(tmp) / f"r{n}s{seed}")
                runs.append(run)
                say(
                    f"{recipe!r} seed {seed}: steps {run['steps']} test {run['test_exact_match']:.4f} {run['seconds']}s"
                )
            steps = [r["steps"] for r in runs]
            done = [s for s in steps if s is not None]
            results.append(
                {
                    "recipe": recipe,
                    "runs": runs,
                    "all_reached": len(done) == len(steps),
                    "max_steps": max(done) if len(done) == len(steps) else None,
                    "median_steps": statistics.median(done) if done else None,
                    "min_test_exact_match": min(r["test_exact_match"] for r in runs),
                }
            )
    return results


def main(argv: list[str] | None = None) -> int:
    summary, details = __doc__.split("\n\n", 1)
    p = argparse.ArgumentParser(
        description=summary, epilog=details, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("recipes", nargs="+", help="one quoted string of train.py overrides per recipe")
    p.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds (default 0,1,2,3,4)")
    p.add_argument("--val-every", type=int, default=25, help="validate every N steps (default 25)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds {args.seeds!r}: comma-separated whole numbers, e.g. 0,1,2")
    for recipe in args.recipes:  # every recipe composes before any trains: a typo in the last costs nothing
        check_command_line(shlex.split(recipe))
    results = search(args.recipes, seeds, args.val_every, say=lambda line: print(line, file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        steps = ", ".join(str(run["steps"]) for run in r["runs"])
        print(f"{r['recipe']}: steps [{steps}] worst {r['max_steps']}, min test {r['min_test_exact_match']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
