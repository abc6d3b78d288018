"""Which heads carry each written digit: activation patching on clean / corrupted pairs, and its gradient estimate.

For every digit the model writes, pairs of problems that differ only where that digit's computation starts
(analysis/engine/pairs.py); each head's clean output patched into the corrupted run in turn
(analysis/engine/pair_runs.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from analysis.engine.pair_runs import head_attribution, head_patching, pearson
from analysis.metric import Column, Context, HeadMetric
from analysis.plots import head_grids, head_heatmaps
from model.hooks import head_label


@dataclass
class PatchingRow:
    layer: int
    head: int
    digit: str  # the studied digit: "r1", "w0.2"
    restored: float  # share of the clean - corrupted gap restored by patching the head's clean output in
    attributed: float  # the same, estimated from gradients (attribution patching, integrated over 8 steps)


class Patching(HeadMetric):
    name = "patching"
    title = "Activation patching"
    intro = (
        "For each digit the model writes, problems paired with a copy that differs in one place's operand digits "
        "(the carry into the digit flips, or the digit's own sum changes). Each head's output from the clean problem "
        "is patched into the run on the corrupted one: the share of the logit difference it restores. Red: the "
        "digit's computation runs through that head."
    )
    columns = (
        Column("layer", "layer"),
        Column("head", "head"),
        Column("digit", "digit"),
        Column("restored", "restored", "fraction"),
        Column("attributed", "attribution estimate", "fraction"),
    )
    figure_key = "heatmap"
    value = "restored"
    variant = "digit"

    def compute(self, ctx: Context) -> list[PatchingRow]:
        net, rows = ctx.module.net, []
        for runs in ctx.digit_runs:
            exact, estimate = head_patching(net, runs), head_attribution(net, runs)
            rows += [
                PatchingRow(layer, head, runs.pairs.target, float(exact[layer, head]), float(estimate[layer, head]))
                for layer in range(ctx.n_layers)
                for head in range(ctx.n_heads)
            ]
        return rows

    def figure(self, rows: list[PatchingRow], ctx: Context):
        grids = head_grids(rows, "restored", "digit", ctx.n_layers, ctx.n_heads, scale=100)
        title = "activation patching: % of each digit's logit difference a head restores"
        return head_heatmaps(grids, title, "% restored", number="+.0f", per_row=4)

    def results(self, rows: list[PatchingRow], ctx: Context) -> dict:
        exact, estimate = torch.tensor([r.restored for r in rows]), torch.tensor([r.attributed for r in rows])
        return {"attribution_correlation_heads": pearson(exact, estimate)}

    def summary(self, rows: list[PatchingRow], ctx: Context) -> list[tuple[str, str]]:
        top = max(rows, key=lambda r: r.restored)
        r = self.results(rows, ctx)["attribution_correlation_heads"]
        return [
            (
                "activation patching",
                f"{head_label(top.layer, top.head)} restores {top.restored:.0%} of {top.digit}; "
                f"attribution estimate r = {r:.2f}",
            )
        ]

    def note(self, row: PatchingRow) -> str:
        return f"restores {row.restored:.0%} of {row.digit} when patched"
