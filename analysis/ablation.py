"""Head ablation and head pruning on a trained calculator: pure measurements, no files, no figures.

Ablation replaces each head's output before ``W_o`` (the ``hook_z`` point) through hooks
(``model/hooks.py``):
  * zero-ablation -- the head's output is set to 0;
  * mean-ablation -- the head's output is replaced by its average over the evaluation set
                     (per position, since every position of a problem has a fixed role).
Scores are teacher-forced: one forward pass gives the loss and greedy exact-match (see
``CalculatorModule.forced_scores``), and each starts at the first layer an ablation touches, from the
residual stream the activation cache holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from analysis.cache import ActivationCache, run_with_cache
from model.hooks import ablated, hook_name
from model.module import CalculatorModule

Heads = dict[tuple[int, int], torch.Tensor | float]  # (layer, head) -> what its output is replaced by


@dataclass
class Score:
    exact_match: float
    loss: float


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


class Evaluator:
    """Scores a fixed set of problems under head replacements, reusing what a replacement cannot change.

    Replacing a head in layer L leaves layers < L untouched, so every score starts from the intact residual
    stream entering the first replaced layer, read from the activation cache of ``seqs``.
    """

    def __init__(
        self, module: CalculatorModule, seqs: torch.Tensor, cache: ActivationCache | None = None, batch_size=5000
    ):
        self.module, self.net, self.seqs, self.batch_size = module, module.net, seqs, batch_size
        if cache is None:
            names = [hook_name(i, "hook_resid_pre") for i in range(len(module.net.blocks))]
            cache = run_with_cache(module.net, seqs[:, :-1], names)
        self.cache = cache

    @cached_property
    def intact(self) -> Score:
        return self.score()

    @torch.no_grad()
    def score(self, heads: Heads | None = None) -> Score:
        """Exact-match and loss with the given heads' outputs replaced (0.0 = zero-ablated)."""
        heads = heads or {}
        start = min((layer for layer, _ in heads), default=0)
        streams = self.cache.layer(start, "hook_resid_pre").split(self.batch_size)  # (B, T-1, d_model) each
        total_loss, n_right = 0.0, 0
        with ablated(self.net, heads):
            for stream, chunk in zip(streams, self.seqs.split(self.batch_size), strict=True):
                x, _ = self.net.run_blocks(stream, start, keep_from=self.module.answer_logits_from)
                loss, exact = self.module.answer_scores(self.net.unembed(x), chunk)
                total_loss += loss.item() * len(chunk)
                n_right += int(exact.sum())
        return Score(n_right / len(self.seqs), total_loss / len(self.seqs))


def evaluate(module: CalculatorModule, seqs: torch.Tensor, heads: Heads | None = None) -> Score:
    """Exact-match and loss over ``seqs`` (N, seq_len) with the given heads replaced (0.0 = switched off)."""
    return Evaluator(module, seqs).score(heads)


def head_means(cache: ActivationCache) -> torch.Tensor:
    """Every head's mean output over the cached problems: (n_layers, n_heads, T, head_dim)."""
    z = cache.stack("attn.hook_z")  # (n_layers, N, T, n_heads, head_dim)
    return z.mean(dim=1).transpose(1, 2)


def ablate_each_head(
    module: CalculatorModule, seqs: torch.Tensor, kinds=("zero", "mean"), evaluator: Evaluator | None = None
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


@dataclass
class PruningStep:
    removed: list[tuple[int, int]]  # heads zeroed so far, in the order they were removed
    fraction: float
    exact_match: float
    loss: float


def prune_heads(
    module: CalculatorModule,
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
