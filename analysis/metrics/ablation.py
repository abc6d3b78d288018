"""What each head is worth: exact-match and loss when it alone is zeroed or mean-ablated.

zero-ablation sets the head's output (before ``W_o``) to 0; mean-ablation replaces it by its average over the
test problems, per position. The evaluator (analysis/engine/evaluator.py) scores each from the activation cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from analysis.engine.cache import run_with_cache
from analysis.engine.evaluator import Evaluator, head_means
from analysis.metric import Column, Context, HeadMetric
from analysis.metrics.roles import Roles
from analysis.plots import ablation_heatmap
from model.calculator import TrainedModel
from model.hooks import head_label


@dataclass
class AblationRow:
    layer: int
    head: int
    ablation: str  # "zero" or "mean"
    exact_match: float
    delta_exact_match: float
    loss: float
    delta_loss: float
    role: str = ""


def ablate_each_head(
    module: TrainedModel, seqs: torch.Tensor, kinds=("zero", "mean"), evaluator: Evaluator | None = None
) -> list[AblationRow]:
    """One row per (layer, head, ablation kind), with deltas against the intact model."""
    cfg = module.net.cfg
    if evaluator is None:
        evaluator = Evaluator(module, seqs, run_with_cache(module.net, seqs[:, :-1]) if "mean" in kinds else None)
    intact = evaluator.intact
    means = head_means(evaluator.cache) if "mean" in kinds else None
    rows = []
    for layer in range(cfg.n_layers):
        for head in range(cfg.n_heads):
            for kind in kinds:
                value = 0.0 if kind == "zero" else means[layer, head]
                score = evaluator.score({(layer, head): value})
                delta_em, delta_loss = score.exact_match - intact.exact_match, score.loss - intact.loss
                rows.append(AblationRow(layer, head, kind, score.exact_match, delta_em, score.loss, delta_loss))
    return rows


class Ablation(HeadMetric):
    name = "ablation"
    title = "Head ablation"
    intro = (
        "Each head switched off alone — its output zeroed, or replaced by its mean over the test problems — "
        "and the test exact-match measured again. Red: the model needs that head."
    )
    columns = (
        Column("layer", "layer"),
        Column("head", "head"),
        Column("ablation", "ablation"),
        Column("exact_match", "exact-match", "fraction"),
        Column("delta_exact_match", "Δ exact-match", "points"),
        Column("loss", "loss", "nats"),
        Column("delta_loss", "Δ loss", "nats"),
        Column("role", "role"),
    )
    figure_key = "heatmap"
    value = "delta_exact_match"
    variant = "ablation"
    scale = "loss"
    needs = (Roles,)  # each row names its head's role

    def compute(self, ctx: Context) -> list[AblationRow]:
        rows = ablate_each_head(ctx.module, ctx.problems, ctx.ablation_kinds, ctx.evaluator)
        roles = {(r.layer, r.head): r.role for r in ctx.result(Roles)}
        for row in rows:
            row.role = roles.get((row.layer, row.head), "")
        return rows

    def figure(self, rows: list[AblationRow], ctx: Context):
        return ablation_heatmap(rows, ctx.n_layers, ctx.n_heads)

    @staticmethod
    def most_important(rows: list[AblationRow], n: int = 3) -> list[AblationRow]:
        zero = [r for r in rows if r.ablation == "zero"]
        return sorted(zero, key=lambda r: (r.delta_exact_match, -r.delta_loss))[:n]

    def results(self, rows: list[AblationRow], ctx: Context) -> dict:
        switched_off: dict[str, dict[str, float]] = {}  # {"L0h0": {"zero": 0.0, "mean": 0.01}}: exact-match
        for r in rows:
            switched_off.setdefault(head_label(r.layer, r.head), {})[r.ablation] = r.exact_match
        return {
            "most_important_heads": [
                {"layer": r.layer, "head": r.head, "delta_exact_match": r.delta_exact_match, "role": r.role}
                for r in self.most_important(rows)
            ],
            "head_ablation": switched_off,  # each head's exact-match with it alone switched off, per kind
        }

    def summary(self, rows: list[AblationRow], ctx: Context) -> list[tuple[str, str]]:
        return [
            (
                "most important heads" if i == 0 else "",
                f"{head_label(r.layer, r.head)}: {r.delta_exact_match:+.1%} when zeroed — {r.role}",
            )
            for i, r in enumerate(self.most_important(rows))
        ]

    def note(self, row: AblationRow) -> str:
        return f"{100 * row.delta_exact_match:+.1f} points when {row.ablation}-ablated"
