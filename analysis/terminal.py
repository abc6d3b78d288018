"""One problem's attention, drawn in the terminal with rich: a shaded query x key grid per layer and head.

The model first writes its own (greedy) answer; then one pass over prompt + answer records every head's
weights, so row t shows where position t looks while predicting token t + 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from rich.columns import Columns
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from data.positions import token_labels
from data.tokenizer import CharTokenizer
from model.transformer import Transformer

# (upper bound of the weight, cell text, colour); an exactly-zero weight is a masked future key: blank
SHADES = [
    (0.05, "··", "grey35"),
    (0.25, "░░", "blue"),
    (0.5, "▒▒", "cyan"),
    (0.75, "▓▓", "yellow"),
    (float("inf"), "██", "bright_white"),
]


@dataclass
class ProblemAttention:
    tokens: list[str]  # the sequence as the model sees it: [BOS] prompt, then its own answer tokens
    labels: list[str]  # short labels, one per token ([BOS] -> '^')
    weights: torch.Tensor  # (n_layers, n_heads, T, T): queries x keys
    prompt_len: int


@torch.inference_mode()
def problem_attention(
    net: Transformer, tokenizer: CharTokenizer, prompt_ids: Sequence[int], n_new: int, places=None
) -> ProblemAttention:
    """Greedy-answer the prompt, then record all heads' weights over prompt + answer (``places``: the layout's place
    ids, for a layout other than the trained one)."""
    net.eval()
    prompt = torch.tensor([list(prompt_ids)], dtype=torch.int64, device=net.tok_emb.weight.device)  # (1, P)
    seq = torch.cat([prompt, net.generate(prompt, n_new, places=places)], dim=1)  # (1, P + n_new)
    _, weights = net(seq, need_weights=True, places=places)  # n_layers x (1, n_heads, T, T)
    tokens = [tokenizer.id_to_token[i] for i in seq[0].tolist()]
    return ProblemAttention(tokens, token_labels(tokens), torch.stack(weights)[:, 0].float().cpu(), len(prompt_ids))


def _cell(weight: float) -> Text:
    if weight == 0.0:
        return Text("  ")
    for bound, text, colour in SHADES:
        if weight < bound:
            return Text(text, style=colour)
    raise AssertionError("unreachable: the last bound is infinite")


def head_table(att: ProblemAttention, layer: int, head: int) -> Table:
    """One head: a row per query, a column per key, both labelled with the tokens (answer tokens in bold)."""
    table = Table(
        title=f"layer {layer} · head {head}",
        box=None,
        padding=0,
        collapse_padding=True,
        show_edge=False,
        title_style="bold",
    )
    style = lambda i: "bold magenta" if i >= att.prompt_len else ""  # noqa: E731
    table.add_column("", justify="right", no_wrap=True)
    for i, label in enumerate(att.labels):
        table.add_column(Text(label.rjust(2), style=style(i)), width=2, no_wrap=True)
    for q, label in enumerate(att.labels):
        row = att.weights[layer, head, q].tolist()
        table.add_row(Text(label, style=style(q)) + Text("│", style="dim"), *(_cell(w) for w in row))
    return table


def legend(att: ProblemAttention) -> Text:
    shades = "  ".join(
        f"{text[0]} <{bound:.0%}" if bound != float("inf") else f"{text[0]} ≥75%" for bound, text, _ in SHADES
    )
    return Text(
        f"rows: queries, columns: keys; ^ = [BOS]; the model's answer in bold; {shades}; blank = masked (future)",
        style="dim",
    )


def render_attention(att: ProblemAttention, title: str = "") -> RenderableType:
    """Every layer's heads side by side (wrapping to the terminal's width), then a legend."""
    n_layers, n_heads = att.weights.shape[:2]
    parts: list[RenderableType] = [Text(title, style="bold")] if title else []
    for layer in range(n_layers):
        parts.append(Columns([head_table(att, layer, h) for h in range(n_heads)], padding=(1, 3)))
    parts.append(legend(att))
    return Group(*parts)
