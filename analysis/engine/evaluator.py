"""The evaluator: a fixed set of problems scored with heads switched off (ablation, pruning, any analysis).

A head is switched off by replacing its output before ``W_o`` (the ``hook_z`` point) through hooks
(``model/hooks.py``):
  * zero-ablation -- the head's output is set to 0;
  * mean-ablation -- the head's output is replaced by its average over the evaluation set
                     (per position, since every position of a problem has a fixed role).
Scores are teacher-forced: one forward pass gives the loss and greedy exact-match (see
``data.problems.answer_scores``), and each starts at the first layer an ablation touches, from the
residual stream the activation cache holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from analysis.engine.cache import ActivationCache, run_with_cache
from data.problems import answer_scores
from model.calculator import TrainedModel
from model.hooks import ablated, hook_name

Heads = dict[tuple[int, int], torch.Tensor | float]  # (layer, head) -> what its output is replaced by


@dataclass
class Score:
    exact_match: float
    loss: float


class Evaluator:
    """Scores a fixed set of problems under head replacements, reusing what a replacement cannot change.

    Replacing a head in layer L leaves layers < L untouched, so every score starts from the intact residual
    stream entering the first replaced layer, read from the activation cache of ``seqs``.
    """

    def __init__(self, module: TrainedModel, seqs: torch.Tensor, cache: ActivationCache | None = None, batch_size=5000):
        self.net, self.fmt, self.seqs, self.batch_size = module.net, module.fmt, seqs, batch_size
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
                x, _ = self.net.run_blocks(stream, start, keep_from=self.fmt.prompt_len - 1)  # '=' predicts the answer
                loss, exact = answer_scores(self.net.unembed(x), chunk)
                total_loss += loss.item() * len(chunk)
                n_right += int(exact.sum())
        return Score(n_right / len(self.seqs), total_loss / len(self.seqs))


def evaluate(module: TrainedModel, seqs: torch.Tensor, heads: Heads | None = None) -> Score:
    """Exact-match and loss over ``seqs`` (N, seq_len) with the given heads replaced (0.0 = switched off)."""
    return Evaluator(module, seqs).score(heads)


def head_means(cache: ActivationCache) -> torch.Tensor:
    """Every head's mean output over the cached problems: (n_layers, n_heads, T, head_dim)."""
    z = cache.stack("attn.hook_z")  # (n_layers, N, T, n_heads, head_dim)
    return z.mean(dim=1).transpose(1, 2)
