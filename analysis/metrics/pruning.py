"""How many heads the model can lose: heads zeroed one after another, least important first, measured after each."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from analysis.engine.evaluator import Evaluator, Score
from analysis.metric import Analysis, Column, Context, points
from analysis.metrics.ablation import Ablation, AblationRow, ablate_each_head
from analysis.plots import pruning_curve
from model.calculator import TrainedModel
from model.hooks import head_label


@dataclass
class PruningStep:
    removed: list[tuple[int, int]]  # heads zeroed so far, in the order they were removed
    fraction: float
    exact_match: float
    loss: float


def prune_heads(
    module: TrainedModel,
    seqs: torch.Tensor,
    order: str = "ranked",
    ablation: list[AblationRow] | None = None,
    evaluator: Evaluator | None = None,
) -> list[PruningStep]:
    """Zero heads one at a time, least important first, measuring after every removal, until none is left.

    order="ranked": importance is each head's own zero-ablation cost (from ``ablation``, measured if not
        given); n_heads measurements in all.
    order="greedy": before every removal, try each remaining head and remove the one whose loss hurts
        least now; about n_heads² / 2 measurements, exact for heads that only matter together.
    Returns the curve, starting with the intact model.
    """
    if order not in ("ranked", "greedy"):
        raise ValueError(f"pruning order {order!r}: use ranked or greedy")
    cfg = module.net.cfg
    n_total = cfg.n_layers * cfg.n_heads
    evaluator = evaluator or Evaluator(module, seqs)
    intact = evaluator.intact
    curve = [PruningStep([], 0.0, intact.exact_match, intact.loss)]

    def removing(head: tuple[int, int]) -> Score:
        return evaluator.score(dict.fromkeys([*curve[-1].removed, head], 0.0))

    if order == "ranked":
        zero = [r for r in (ablation or ablate_each_head(module, seqs, ("zero",), evaluator)) if r.ablation == "zero"]
        ranking = [(r.layer, r.head) for r in sorted(zero, key=lambda r: (-r.exact_match, r.loss))]
    remaining = [(layer, head) for layer in range(cfg.n_layers) for head in range(cfg.n_heads)]
    while remaining:
        if order == "ranked":
            head = ranking[len(curve) - 1]
            score = removing(head)
        else:
            score, head = max(((removing(h), h) for h in remaining), key=lambda c: (c[0].exact_match, -c[0].loss))
        remaining.remove(head)
        removed = curve[-1].removed + [head]
        curve.append(PruningStep(removed, len(removed) / n_total, score.exact_match, score.loss))
    return curve


def prunable_fraction(curve: list[PruningStep], tolerance: float) -> float:
    """The largest fraction of heads removed (along the curve) losing at most ``tolerance`` exact-match."""
    floor = curve[0].exact_match - tolerance
    fraction = 0.0
    for step in curve:
        if step.exact_match < floor:
            break
        fraction = step.fraction
    return fraction


class Pruning(Analysis):
    name = "pruning"
    title = "Pruning"
    intro = "Heads zeroed one after another, least important first, the test exact-match measured after each."
    columns = (
        Column("n_removed", "heads removed"),
        Column("fraction_removed", "fraction removed", "fraction"),
        Column("exact_match", "exact-match", "fraction"),
        Column("loss", "loss", "nats"),
        Column("removed_head", "removed last"),
    )
    figure_key = "curve"
    view = "curve"
    needs = (Ablation,)  # the ranking: each head's own zero-ablation cost

    def compute(self, ctx: Context) -> list[dict]:
        if not ctx.prune:
            return []
        zero = [r for r in ctx.result(Ablation) if r.ablation == "zero"] or None
        curve = prune_heads(ctx.module, ctx.problems, ctx.prune, zero, ctx.evaluator)
        return [
            {
                "n_removed": len(s.removed),
                "fraction_removed": s.fraction,
                "exact_match": s.exact_match,
                "loss": s.loss,
                "removed_head": head_label(*s.removed[-1]) if s.removed else "",
                "step": s,
            }
            for s in curve
        ]

    def prunable(self, rows: list[dict], ctx: Context) -> float:
        return prunable_fraction([r["step"] for r in rows], ctx.tolerance)

    def figure(self, rows: list[dict], ctx: Context):
        if not rows:
            return None
        return pruning_curve([r["step"] for r in rows], self.prunable(rows, ctx), ctx.tolerance, ctx.prune)

    def results(self, rows: list[dict], ctx: Context) -> dict:
        if not rows:
            return {}
        return {
            "prunable_fraction": self.prunable(rows, ctx),
            "pruning_order": ctx.prune,
            "pruning_curve": [
                {"fraction_removed": r["fraction_removed"], "exact_match": r["exact_match"]} for r in rows
            ],
        }

    def summary(self, rows: list[dict], ctx: Context) -> list[tuple[str, str]]:
        if not rows:
            return []
        return [("prunable", f"{self.prunable(rows, ctx):.0%} of heads removable losing ≤ {points(ctx.tolerance)}")]

    def describe(self) -> dict:
        return super().describe() | {"x": "fraction_removed", "y": "exact_match", "point_label": "removed_head"}
