"""What each head is worth: exact-match and loss when it alone is zeroed or mean-ablated (analysis/ablation.py)."""

from __future__ import annotations

from analysis.ablation import AblationRow, ablate_each_head
from analysis.metric import Column, Context, HeadMetric
from analysis.plots import ablation_heatmap


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

    def compute(self, ctx: Context) -> list[AblationRow]:
        rows = ablate_each_head(ctx.module, ctx.problems, ctx.ablation_kinds, ctx.evaluator)
        roles = {(r.layer, r.head): r.role for r in ctx.done.get("roles", [])}
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
        return {
            "most_important_heads": [
                {"layer": r.layer, "head": r.head, "delta_exact_match": r.delta_exact_match, "role": r.role}
                for r in self.most_important(rows)
            ],
        }

    def summary(self, rows: list[AblationRow], ctx: Context) -> list[tuple[str, str]]:
        return [
            (
                "most important heads" if i == 0 else "",
                f"L{r.layer}h{r.head}: {r.delta_exact_match:+.1%} when zeroed — {r.role}",
            )
            for i, r in enumerate(self.most_important(rows))
        ]

    def note(self, row: AblationRow) -> str:
        return f"{100 * row.delta_exact_match:+.1f} points when {row.ablation}-ablated"
