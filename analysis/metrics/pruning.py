"""How many heads the model can lose: heads zeroed one after another, least important first."""

from __future__ import annotations

from analysis.ablation import prunable_fraction, prune_heads
from analysis.metric import Analysis, Column, Context, points
from analysis.plots import pruning_curve


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

    def compute(self, ctx: Context) -> list[dict]:
        if not ctx.prune:
            return []
        zero = [r for r in ctx.done.get("ablation", []) if r.ablation == "zero"] or None
        curve = prune_heads(ctx.module, ctx.problems, ctx.prune, zero, ctx.evaluator)
        return [
            {
                "n_removed": len(s.removed),
                "fraction_removed": s.fraction,
                "exact_match": s.exact_match,
                "loss": s.loss,
                "removed_head": f"L{s.removed[-1][0]}h{s.removed[-1][1]}" if s.removed else "",
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
