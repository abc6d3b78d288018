"""Head ablation and greedy head pruning on a trained calculator.

Ablation acts on each head's output before ``W_o`` (the ``hook_z`` point of the attention block):
  * zero-ablation -- the head's output is multiplied by 0 through ``head_mask``;
  * mean-ablation -- the head's output is replaced by its average over the evaluation set
                     (per position, since every position of a problem has a fixed role).
Scores are teacher-forced: one forward pass gives the loss and greedy exact-match (see
``CalculatorModule.forced_scores``), and each starts at the first layer an ablation touches.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

import torch

from model.module import CalculatorModule


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
    """Scores a fixed set of problems under head ablations, reusing what an ablation cannot change.

    Ablating a head in layer L leaves layers < L untouched, so the intact residual stream entering each
    block is computed once (on first need) and every score starts at the first layer that is ablated.
    """

    def __init__(self, module: CalculatorModule, seqs: torch.Tensor, batch_size: int = 5000):
        self.module, self.net = module, module.net
        self.chunks = seqs.split(batch_size)
        self.n = len(seqs)
        self._streams: list[list[torch.Tensor]] | None = None

    def stream(self, chunk: int, layer: int) -> torch.Tensor:
        """Chunk ``chunk``'s residual stream entering block ``layer`` in the intact model, (B, T-1, d_model)."""
        if layer == 0:
            return self.net.embed(self.chunks[chunk][:, :-1])
        if self._streams is None:
            self._streams = []
            for c in range(len(self.chunks)):
                inputs = [self.stream(c, 0)]
                for block in self.net.blocks[:-1]:  # the last block's output is never an input
                    inputs.append(block(inputs[-1])[0])
                self._streams.append(inputs)
        return self._streams[chunk][layer]

    @cached_property
    def intact(self) -> Score:
        return self.score(start_layer=0)

    @torch.no_grad()
    def score(self, head_mask: torch.Tensor | None = None, start_layer: int | None = None) -> Score:
        """Exact-match and loss with ``head_mask`` (n_layers, n_heads). ``start_layer``: the first layer whose
        computation differs from the intact model's (found from the mask when not given)."""
        if start_layer is None:
            ablated = [] if head_mask is None else (head_mask == 0).any(dim=1).nonzero().flatten().tolist()
            start_layer = ablated[0] if ablated else 0
        total_loss, n_right = 0.0, 0
        for c, chunk in enumerate(self.chunks):
            x, _ = self.net.run_blocks(
                self.stream(c, start_layer), start_layer, head_mask=head_mask, keep_from=self.module.answer_logits_from
            )
            loss, exact = self.module.answer_scores(self.net.unembed(x), chunk)
            total_loss += loss.item() * len(chunk)
            n_right += int(exact.sum())
        return Score(n_right / self.n, total_loss / self.n)


def evaluate(module: CalculatorModule, seqs: torch.Tensor, head_mask: torch.Tensor | None = None) -> Score:
    """Exact-match and loss over ``seqs`` (N, seq_len) with the given (n_layers, n_heads) head mask."""
    return Evaluator(module, seqs).score(head_mask, start_layer=0)


@contextmanager
def replaced_heads(module: CalculatorModule, replacements: dict[tuple[int, int], torch.Tensor]):
    """Within the block, head (layer, head)'s output z is replaced by the given (T, head_dim) tensor."""
    handles = []
    for layer, block in enumerate(module.net.blocks):
        mine = {h: value for (lyr, h), value in replacements.items() if lyr == layer}
        if not mine:
            continue

        def swap(_module, _inputs, z, mine=mine):  # z: (B, T, n_heads, head_dim)
            z = z.clone()
            for h, value in mine.items():
                z[:, :, h] = value
            return z

        handles.append(block.attn.hook_z.register_forward_hook(swap))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def head_means(module: CalculatorModule, seqs: torch.Tensor) -> torch.Tensor:
    """Every head's mean output over ``seqs``: (n_layers, n_heads, T-1, head_dim)."""
    sums = []

    def grab(_module, _inputs, z):  # z: (B, T, n_heads, head_dim)
        sums.append(z.sum(dim=0).transpose(0, 1))  # (n_heads, T, head_dim)

    net = module.net
    handles = [b.attn.hook_z.register_forward_hook(grab) for b in net.blocks]
    try:
        totals = None
        for chunk in seqs.split(5000):
            sums.clear()
            net(chunk[:, :-1])
            batch = torch.stack(sums)
            totals = batch if totals is None else totals + batch
    finally:
        for handle in handles:
            handle.remove()
    return totals / len(seqs)


def ablate_each_head(
    module: CalculatorModule,
    seqs: torch.Tensor,
    kinds: tuple[str, ...] = ("zero", "mean"),
    evaluator: Evaluator | None = None,
) -> list[AblationRow]:
    """One row per (layer, head, ablation kind), with deltas against the intact model."""
    cfg = module.net.cfg
    evaluator = evaluator or Evaluator(module, seqs)
    intact = evaluator.intact
    means = head_means(module, seqs) if "mean" in kinds else None
    rows = []
    for layer in range(cfg.n_layers):
        for head in range(cfg.n_heads):
            for kind in kinds:
                if kind == "zero":
                    mask = torch.ones(cfg.n_layers, cfg.n_heads, device=module.device)
                    mask[layer, head] = 0
                    score = evaluator.score(mask)
                else:
                    with replaced_heads(module, {(layer, head): means[layer, head]}):
                        score = evaluator.score(start_layer=layer)
                rows.append(
                    AblationRow(
                        layer,
                        head,
                        kind,
                        score.exact_match,
                        score.exact_match - intact.exact_match,
                        score.loss,
                        score.loss - intact.loss,
                    )
                )
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
    mask = torch.ones(cfg.n_layers, cfg.n_heads, device=module.device)
    curve = [PruningStep([], 0.0, intact.exact_match, intact.loss)]

    def removing(layer: int, head: int) -> tuple[torch.Tensor, Score]:
        trial = mask.clone()
        trial[layer, head] = 0
        return trial, evaluator.score(trial)

    if order == "ranked":
        zero = [r for r in (ablation or ablate_each_head(module, seqs, ("zero",), evaluator)) if r.ablation == "zero"]
        ranking = [(r.layer, r.head) for r in sorted(zero, key=lambda r: (-r.exact_match, r.loss))]
    while mask.any():
        if order == "ranked":
            layer, head = ranking[len(curve) - 1]
            mask, score = removing(layer, head)
        else:
            candidates = [(removing(lyr, h), (lyr, h)) for lyr, h in mask.nonzero().tolist()]
            (mask, score), (layer, head) = max(candidates, key=lambda c: (c[0][1].exact_match, -c[0][1].loss))
        removed = curve[-1].removed + [(layer, head)]
        curve.append(PruningStep(removed, len(removed) / n_total, score.exact_match, score.loss))
    return curve


def prunable_fraction(curve: list[PruningStep], tolerance: float = 0.01) -> float:
    """The largest fraction of heads removed (along the curve) losing at most ``tolerance`` exact-match."""
    floor = curve[0].exact_match - tolerance
    fraction = 0.0
    for step in curve:
        if step.exact_match < floor:
            break
        fraction = step.fraction
    return fraction
