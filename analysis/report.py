"""The end-of-run look inside: final attention maps, head ablation, greedy pruning and head roles.

Writes into the run directory: attention/final_layer*.png (+ final.json), ablation.csv, ablation.png,
pruning.csv, pruning.png; logs the same images and tables to wandb; returns the numbers for results.json.
"""

from __future__ import annotations

import csv
from pathlib import Path

import torch

from analysis.ablation import Evaluator, ablate_each_head, prunable_fraction, prune_heads
from analysis.maps import draw_attention_maps, wandb_loggers
from analysis.plots import ablation_heatmap, pruning_curve
from analysis.roles import describe_heads, mean_patterns
from model.module import CalculatorModule

ABLATION_COLUMNS = ["layer", "head", "ablation", "exact_match", "delta_exact_match", "loss", "delta_loss", "role"]
PRUNING_COLUMNS = ["n_removed", "fraction_removed", "exact_match", "loss", "removed_head"]


def _write_csv(path: Path, columns: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows(rows)


@torch.no_grad()
def analyse_heads(module: CalculatorModule, seqs: torch.Tensor, run_dir: Path, probes: list[str],
                  loggers=(), kinds=("zero", "mean"), prune: str | None = "ranked", tolerance: float = 0.01) -> dict:
    """Run every analysis on ``seqs`` (test problems) and return its headline numbers.

    prune: "ranked" or "greedy" (see ``prune_heads``), or None for no pruning curve.
    """
    module.eval()
    cfg = module.net.cfg
    maps = draw_attention_maps(module, probes, run_dir / "attention", "final", loggers)

    evaluator = Evaluator(module, seqs)
    intact = evaluator.intact
    roles = describe_heads(module.fmt, mean_patterns(module.net, seqs))
    rows = ablate_each_head(module, seqs, tuple(kinds), evaluator)
    for row in rows:
        row.role = roles[(row.layer, row.head)]
    ablation_rows = [[getattr(r, c) for c in ABLATION_COLUMNS] for r in rows]
    _write_csv(run_dir / "ablation.csv", ABLATION_COLUMNS, ablation_rows)
    images = {"ablation": ablation_heatmap(rows, cfg.n_layers, cfg.n_heads, run_dir / "ablation.png")}

    zero = sorted((r for r in rows if r.ablation == "zero"), key=lambda r: (r.delta_exact_match, -r.delta_loss))
    results = {
        "analysis_problems": len(seqs),
        "intact_exact_match": intact.exact_match,
        "most_important_heads": [
            {"layer": r.layer, "head": r.head, "delta_exact_match": r.delta_exact_match, "role": r.role}
            for r in zero[:3]],
        "head_roles": {f"L{layer}h{head}": role for (layer, head), role in roles.items()},
    }
    pruning_rows = []
    if prune:
        curve = prune_heads(module, seqs, prune, rows, evaluator)
        results["prunable_fraction"] = prunable_fraction(curve, tolerance)
        results["pruning_order"] = prune
        results["pruning_curve"] = [{"fraction_removed": s.fraction, "exact_match": s.exact_match} for s in curve]
        pruning_rows = [[len(s.removed), s.fraction, s.exact_match, s.loss,
                         f"L{s.removed[-1][0]}h{s.removed[-1][1]}" if s.removed else ""] for s in curve]
        _write_csv(run_dir / "pruning.csv", PRUNING_COLUMNS, pruning_rows)
        images["pruning"] = pruning_curve(curve, results["prunable_fraction"], run_dir / "pruning.png")

    for logger in wandb_loggers(loggers):
        logger.log_table(key="ablation/table", columns=ABLATION_COLUMNS, data=ablation_rows)
        logger.log_image(key="ablation/heatmap", images=[str(images["ablation"])])
        if prune:
            logger.log_table(key="pruning/table", columns=PRUNING_COLUMNS, data=pruning_rows)
            logger.log_image(key="pruning/curve", images=[str(images["pruning"])])
            logger.experiment.summary["prunable_fraction"] = results["prunable_fraction"]

    results["images"] = {"attention": [str(p) for p in maps], **{k: str(v) for k, v in images.items()}}
    return results
