"""Direct logit attribution: how much each head's own output raises the right answer token's logit.

Through the residual stream, a head's output reaches the logits directly (and through later layers). Its direct
part is linear once the final LayerNorm's scale is read from the cache: out_h (centred, divided by that scale,
times ln_f's weight) dotted with the right token's unembedding minus the average token's. Summed over every
head, the MLPs, the embeddings and the biases it is exactly that token's logit above the average logit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from analysis.metric import Column, Context, HeadMetric
from analysis.plots import head_grids, head_heatmaps
from data.positions import RESULT_DIGITS, positions
from model.hooks import head_label

ALL = "all answer digits"


@dataclass
class DirectLogitRow:
    layer: int
    head: int
    place: str  # the answer digit ("r0", ...), or ALL
    direct_logit: float  # mean over problems: logits added to the right token, above the average token


def head_logit_contributions(net, cache, seqs: torch.Tensor, queries: list[int]) -> torch.Tensor:
    """(n_layers, n_heads, N, Q): head h of layer l's direct effect on the logit of the right next token (above
    the average logit) at each query position; ``cache`` holds the pass over seqs[:, :-1]."""
    resid = cache["hook_resid_final"][:, queries]  # (N, Q, d_model)
    scale = (resid.var(dim=-1, unbiased=False, keepdim=True) + net.ln_f.eps).sqrt()  # ln_f's, frozen
    unembed = net.lm_head.weight  # (vocab, d_model)
    right = seqs[:, [q + 1 for q in queries]]  # (N, Q): the token each query predicts
    direction = (unembed[right] - unembed.mean(dim=0)) * net.ln_f.weight  # (N, Q, d_model)
    per_layer = []
    for layer, block in enumerate(net.blocks):
        attn = block.attn
        z = cache.layer(layer, "attn.hook_z")[:, queries]  # (N, Q, n_heads, head_dim)
        W_o = attn.W_o.weight.view(attn.d_model, attn.n_heads, attn.head_dim)
        out = torch.einsum("nqhe,dhe->nqhd", z, W_o)  # each head's write to the residual stream
        out = (out - out.mean(dim=-1, keepdim=True)) / scale.unsqueeze(2)  # through ln_f, its scale frozen
        per_layer.append(torch.einsum("nqhd,nqd->hnq", out, direction))
    return torch.stack(per_layer)


class DirectLogitAttribution(HeadMetric):
    name = "dla"
    title = "Direct logit attribution"
    intro = (
        "How many logits each head's own output adds to the right answer token (above the average token), "
        "straight through the final LayerNorm to the unembedding, averaged over the test problems: per answer digit "
        "and over all of them. Red: the head writes the answer; blue: it writes against it."
    )
    columns = (
        Column("layer", "layer"),
        Column("head", "head"),
        Column("place", "answer digit"),
        Column("direct_logit", "direct logit", "logit"),
    )
    figure_key = "heatmap"
    value = "direct_logit"
    variant = "place"

    def compute(self, ctx: Context) -> list[DirectLogitRow]:
        fmt, where = ctx.fmt, positions(ctx.fmt)
        queries = [
            p - 1 for p in range(fmt.prompt_len, fmt.prompt_len + fmt.answer_len) if where[p].kind in RESULT_DIGITS
        ]
        effect = head_logit_contributions(ctx.module.net, ctx.cache, ctx.problems, queries).mean(dim=2)  # (L, H, Q)
        places = [(ALL, effect.mean(dim=-1))] + [(where[q + 1].short, effect[..., i]) for i, q in enumerate(queries)]
        return [
            DirectLogitRow(layer, head, place, float(values[layer, head]))
            for place, values in places
            for layer in range(ctx.n_layers)
            for head in range(ctx.n_heads)
        ]

    def figure(self, rows: list[DirectLogitRow], ctx: Context):
        grids = head_grids(rows, "direct_logit", "place", ctx.n_layers, ctx.n_heads)
        title = "direct logit attribution: logits each head adds to the right token"
        return head_heatmaps(grids, title, "logits", number="+.2f")

    def results(self, rows: list[DirectLogitRow], ctx: Context) -> dict:
        return {
            "direct_logit_attribution": {head_label(r.layer, r.head): r.direct_logit for r in rows if r.place == ALL}
        }

    def summary(self, rows: list[DirectLogitRow], ctx: Context) -> list[tuple[str, str]]:
        top = max((r for r in rows if r.place == ALL), key=lambda r: r.direct_logit)
        return [
            (
                "largest direct effect",
                f"{head_label(top.layer, top.head)}: {top.direct_logit:+.2f} logits to the right token",
            )
        ]

    def note(self, row: DirectLogitRow) -> str:
        return f"{row.direct_logit:+.2f} logits to the right token, directly"
