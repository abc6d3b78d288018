"""The end-of-run look inside: final attention maps, head ablation, greedy pruning and head roles.

Writes into the run directory: attention/final_layer*.png (+ final.json), ablation.csv, ablation.png,
pruning.csv, pruning.png; logs the same images and tables to wandb; returns the numbers for results.json.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from analysis.ablation import Evaluator, ablate_each_head, prunable_fraction, prune_heads
from analysis.maps import default_probes, draw_attention_maps, probe_sequences
from analysis.plots import ablation_heatmap, pruning_curve
from analysis.roles import describe_heads, mean_patterns
from model.module import CalculatorModule
from training.loggers import wandb_loggers

ABLATION_COLUMNS = ["layer", "head", "ablation", "exact_match", "delta_exact_match", "loss", "delta_loss", "role"]
PRUNING_COLUMNS = ["n_removed", "fraction_removed", "exact_match", "loss", "removed_head"]


def _write_csv(path: Path, columns: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows(rows)


@torch.no_grad()
def analyse_heads(
    module: CalculatorModule,
    seqs: torch.Tensor,
    run_dir: Path,
    probes: list[str],
    loggers=(),
    kinds=("zero", "mean"),
    prune: str | None = "ranked",
    tolerance: float = 0.01,
) -> dict:
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
            for r in zero[:3]
        ],
        "head_roles": {f"L{layer}h{head}": role for (layer, head), role in roles.items()},
    }
    pruning_rows = []
    if prune:
        curve = prune_heads(module, seqs, prune, rows, evaluator)
        results["prunable_fraction"] = prunable_fraction(curve, tolerance)
        results["pruning_order"] = prune
        results["pruning_curve"] = [{"fraction_removed": s.fraction, "exact_match": s.exact_match} for s in curve]
        pruning_rows = [
            [
                len(s.removed),
                s.fraction,
                s.exact_match,
                s.loss,
                f"L{s.removed[-1][0]}h{s.removed[-1][1]}" if s.removed else "",
            ]
            for s in curve
        ]
        _write_csv(run_dir / "pruning.csv", PRUNING_COLUMNS, pruning_rows)
        images["pruning"] = pruning_curve(curve, results["prunable_fraction"], run_dir / "pruning.png", prune)

    for logger in wandb_loggers(loggers):
        logger.log_table(key="ablation/table", columns=ABLATION_COLUMNS, data=ablation_rows)
        logger.log_image(key="ablation/heatmap", images=[str(images["ablation"])])
        if prune:
            logger.log_table(key="pruning/table", columns=PRUNING_COLUMNS, data=pruning_rows)
            logger.log_image(key="pruning/curve", images=[str(images["pruning"])])
            logger.experiment.summary["prunable_fraction"] = results["prunable_fraction"]

    results["images"] = {"attention": [str(p) for p in maps], **{k: str(v) for k, v in images.items()}}
    return results


@dataclass
class HeadAnalysis:
    """What the end-of-run look inside the heads does (configs/analysis/default.yaml builds one).

    Args:
        probes: problems whose attention is drawn, e.g. ["999+1", "456+789"]; None = chosen for the task.
        n_problems: test problems that ablation and pruning are measured on (None = the whole test set).
        ablation: "zero" (head output x 0 before W_o) and/or "mean" (replaced by its test-set average).
        prune: "ranked", "greedy" (see ``prune_heads``) or None for no pruning curve.
        tolerance: prunable_fraction counts heads removable losing at most this much exact-match.
        enabled: False skips it all (``analysis=none`` does the same).
    """

    probes: list[str] | None = None
    n_problems: int | None = 1000
    ablation: tuple[str, ...] = ("zero", "mean")
    prune: str | None = "ranked"
    tolerance: float = 0.01
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.probes is not None:
            if isinstance(self.probes, str) or not self.probes:
                raise ValueError(
                    f"probes={self.probes!r}: give a list of problems such as [456+789] (null for the task's own)"
                )
            self.probes = [str(p) for p in self.probes]
        if self.n_problems is not None and (
            not isinstance(self.n_problems, int) or isinstance(self.n_problems, bool) or self.n_problems < 1
        ):
            raise ValueError(f"n_problems={self.n_problems!r}: must be a whole number >= 1, or null for all")
        kinds = self.ablation
        if isinstance(kinds, str) or not all(k in ("zero", "mean") for k in kinds):
            raise ValueError(f"ablation={kinds!r}: must be a list of zero and/or mean")
        self.ablation = tuple(kinds)
        if self.prune not in ("ranked", "greedy", None):
            raise ValueError(f"prune={self.prune!r}: must be ranked, greedy or null")
        if (
            isinstance(self.tolerance, bool)
            or not isinstance(self.tolerance, (int, float))
            or not 0 <= self.tolerance < 1
        ):
            raise ValueError(f"tolerance={self.tolerance!r}: must be a number in [0, 1)")
        if not isinstance(self.enabled, bool):
            raise ValueError(f"enabled={self.enabled!r}: must be true or false")

    def probes_for(self, module: CalculatorModule) -> list[str]:
        """The probe problems, checked against the model's format (ValueError naming the bad one)."""
        probes = self.probes or default_probes(module.fmt)
        try:
            probe_sequences(module, probes)
        except ValueError as e:
            raise ValueError(f"probes: {e}") from None
        return probes

    def run(self, module: CalculatorModule, test_set: torch.Tensor, run_dir: Path, loggers=()) -> dict:
        """Every analysis on the first n_problems of ``test_set``; the numbers for results.json."""
        started = time.perf_counter()
        problems = test_set[: self.n_problems].to(module.device)
        results = analyse_heads(
            module, problems, run_dir, self.probes_for(module), loggers, self.ablation, self.prune, self.tolerance
        )
        return results | {"analysis_seconds": round(time.perf_counter() - started, 2)}
