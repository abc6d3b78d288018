"""The clean and corrupted runs of problem pairs (analysis/engine/pairs.py), and what patching between them measures:
activation patching, path patching and attribution patching.

Every number is a share of the pairs' metric gap, LD = logit[clean digit] - logit[corrupted digit] at the studied
digit, averaged over the pairs:

    head patching    run the corrupted problems with one head's output (hook_z, every position) taken from the
                     clean run: restored = (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted)
    edge patching    run the clean problems with one edge's sender read from the corrupted run (path patching:
                     only that receiver sees the change): lost = (LD_clean - LD_patched) / (LD_clean - LD_corrupted)
    attribution      the same two numbers from one backward pass: the first-order (gradient) estimate
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from analysis.engine.cache import run_with_cache
from analysis.engine.graph import ComponentGraph
from analysis.engine.pairs import Pairs, contrast_pairs, studied_digits
from analysis.progress import stage
from data.problems import ProblemFormat
from model.hooks import ablated, hook_name, hooks

N_PAIRS = 128  # pairs per studied digit


@dataclass
class PairRuns:
    """The clean and corrupted runs of one set of pairs: their metric, head outputs and graph sender outputs."""

    pairs: Pairs
    clean_lds: torch.Tensor  # (n,) LD of each clean problem
    corrupted_lds: torch.Tensor  # (n,) ... and of each corrupted one
    clean_z: list[torch.Tensor]  # per layer (n, T, n_heads, head_dim)
    corrupted_z: list[torch.Tensor]
    corrupted_outs: torch.Tensor  # the component graph's sender outputs on the corrupted problems (n_senders, n, T, d)
    clean_outs: torch.Tensor  # ... and on the clean ones

    @property
    def clean_ld(self) -> float:
        return float(self.clean_lds.mean())

    @property
    def corrupted_ld(self) -> float:
        return float(self.corrupted_lds.mean())

    @property
    def gap(self) -> float:
        return self.clean_ld - self.corrupted_ld

    @property
    def told_apart(self) -> bool:
        """The model tells these pairs' digits apart: the right digit ahead on the clean problems and on the
        corrupted ones. Only then is there a gap to measure shares of; a model that has not learned the digit
        (or a kind of pairs of it) has none, and nothing is measured on them."""
        return self.clean_ld > 0 > self.corrupted_ld

    def subset(self, kind: str) -> PairRuns:
        """The runs of the pairs of one kind only (slices: nothing is run again)."""
        keep = torch.tensor([k == kind for k in self.pairs.kinds], device=self.clean_lds.device)
        return PairRuns(
            self.pairs.subset(kind),
            self.clean_lds[keep],
            self.corrupted_lds[keep],
            [z[keep] for z in self.clean_z],
            [z[keep] for z in self.corrupted_z],
            self.corrupted_outs[:, keep],
            self.clean_outs[:, keep],
        )


@torch.no_grad()
def pair_runs(graph: ComponentGraph, pairs: Pairs) -> PairRuns:
    net = graph.net
    names = [hook_name(i, "attn.hook_z") for i in range(graph.n_layers)]
    clean = run_with_cache(net, pairs.inputs, names)
    corrupted = run_with_cache(net, pairs.corrupted_inputs, names)
    _, corrupted_outs = graph.run(pairs.corrupted_inputs)
    _, clean_outs = graph.run(pairs.inputs)
    return PairRuns(
        pairs,
        pairs.logit_diff(clean.logits),
        pairs.logit_diff(corrupted.logits),
        [clean[n] for n in names],
        [corrupted[n] for n in names],
        corrupted_outs,
        clean_outs,
    )


def digit_runs(graph: ComponentGraph, fmt: ProblemFormat, device=None, n: int = N_PAIRS) -> list[PairRuns]:
    """The runs of up to ``n`` pairs per written digit, for the digits the model tells apart: the right digit ahead
    on the clean and on the corrupted problems (patching measures a share of that gap)."""
    found = [contrast_pairs(fmt, at, n) for at in studied_digits(fmt)]
    runs = [pair_runs(graph, pairs.to(device)) for pairs in found if len(pairs)]
    return [r for r in runs if r.told_apart]


@torch.no_grad()
def head_patching(net, runs: PairRuns) -> torch.Tensor:
    """(n_layers, n_heads): the share of the gap restored by patching each head's clean output into the
    corrupted run (exact: one forward pass per head, through the hook points)."""
    L, H = len(runs.clean_z), runs.clean_z[0].shape[2]
    restored = torch.zeros(L, H)
    for layer in range(L):
        for head in range(H):
            with ablated(net, {(layer, head): runs.clean_z[layer][:, :, head]}):
                ld = float(runs.pairs.logit_diff(net(runs.pairs.corrupted_inputs)[0]).mean())
            restored[layer, head] = (ld - runs.corrupted_ld) / runs.gap
    return restored


def head_attribution(net, runs: PairRuns, steps: int = 8) -> torch.Tensor:
    """(n_layers, n_heads): attribution patching's estimate of :func:`head_patching`, (clean z - corrupted z) .
    d LD / d z, summed over positions. ``steps`` > 1 averages the gradient over inputs interpolated between the
    corrupted and the clean embeddings (integrated gradients, as EAP-IG); 1 takes it at the corrupted run alone
    (plain attribution patching). ``steps`` forward and backward passes."""
    names = [hook_name(i, "attn.hook_z") for i in range(len(runs.clean_z))]
    embed = hook_name(0, "hook_resid_pre")
    with torch.no_grad():
        x_clean, x_corrupted = runs.pairs.inputs, runs.pairs.corrupted_inputs
        start, end = net.embed(x_corrupted), net.embed(x_clean)
    grads = [torch.zeros_like(z) for z in runs.clean_z]
    alphas = [0.0] if steps == 1 else [(i + 0.5) / steps for i in range(steps)]  # midpoints
    seen: dict[str, torch.Tensor] = {}  # each pass's head outputs, to take gradients at
    for alpha in alphas:
        fns = {n: lambda z, n=n: seen.__setitem__(n, z) for n in names}
        fns[embed] = lambda _x, a=alpha: start + a * (end - start)
        with torch.enable_grad(), hooks(net, fns):
            ld = runs.pairs.logit_diff(net(x_corrupted)[0]).mean()
            for total, grad in zip(grads, torch.autograd.grad(ld, [seen[n] for n in names]), strict=True):
                total += grad / len(alphas)
    per_layer = [
        ((clean - corrupted) * grad).sum(dim=(0, 1, 3))  # (n_heads,)
        for clean, corrupted, grad in zip(runs.clean_z, runs.corrupted_z, grads, strict=True)
    ]
    return torch.stack(per_layer).detach() / runs.gap


@torch.no_grad()
def edge_patching(graph: ComponentGraph, runs: PairRuns) -> torch.Tensor:
    """(n_edges,): the share of the gap lost when that one edge reads its sender from the corrupted run
    (exact path patching: the component graph with one edge patched, a pass per edge)."""
    lost = torch.zeros(len(graph))
    with stage("path patching: edges", total=len(graph)) as progress:  # in the terminal only
        for edge in range(len(graph)):
            weights = torch.ones(1, len(graph), device=runs.pairs.clean.device)
            weights[0, edge] = 0.0
            lost[edge] = float((runs.clean_ld - lds(graph, runs, weights)) / runs.gap)
            progress.advance(1)
    return lost


def lds(graph: ComponentGraph, runs: PairRuns, weights: torch.Tensor, memo: dict | None = None) -> torch.Tensor:
    """(C,) the mean LD of the clean problems under each row of edge weights (C, n_edges), a pass per row: each
    starts at the first layer its changed edges reach, and on a CPU one variant a pass is the fastest per variant
    (three a pass took ~1.3x as long each: their arrays fall out of the cache). ``memo``: see ComponentGraph.run."""
    return torch.cat([variant_lds(graph, runs, row, memo) for row in weights.split(1)])


def variant_lds(graph: ComponentGraph, runs: PairRuns, weights: torch.Tensor, memo: dict | None = None) -> torch.Tensor:
    """(C,) the mean LD of the clean problems under each row of edge weights (C, n_edges), in one pass: the
    layers no changed edge reaches are the clean run's, and only the studied digit's position is computed (the
    inputs end at its query)."""
    logits = graph.run(runs.pairs.inputs, weights, runs.corrupted_outs, runs.clean_outs, True, memo)[0]
    return torch.stack([runs.pairs.digit_logit_diff(variant[:, -1]).mean() for variant in logits])  # (C, n, 1, V)


def edge_attribution(graph: ComponentGraph, runs: PairRuns, steps: int = 8) -> torch.Tensor:
    """(n_edges,): the gradient estimate of :func:`edge_patching`: LD moves by about d LD / d weight when an
    edge's weight goes from 1 (clean) to 0 (corrupted). ``steps`` > 1 averages that gradient along the path of
    every weight from 0 to 1 (integrated gradients over the edge weights: the scores then add up to the whole gap);
    1 takes it at the clean run (plain edge attribution patching, EAP). A forward and backward pass per step, each
    pass's graph freed before the next: autograd keeps every intermediate of a pass (for the default model's 128 pairs,
    ~70 MB a step), so batching steps would multiply the peak memory for little time."""
    device = runs.pairs.clean.device
    alphas = [1.0] if steps == 1 else [(i + 0.5) / steps for i in range(steps)]  # midpoints
    total = torch.zeros(len(graph), device=device)
    for alpha in alphas:
        weights = torch.full((1, len(graph)), alpha, device=device, requires_grad=True)  # (1, n_edges)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(variant_lds(graph, runs, weights).sum(), [weights])
        total += grad[0]
    return total.cpu() / len(alphas) / runs.gap  # the mean over steps


@torch.no_grad()
def faithfulness(graph: ComponentGraph, runs: PairRuns, keeps: list[set], memo: dict | None = None) -> list[float]:
    """The share of the gap each set of edges recovers on its own: the clean problems, with every edge outside
    the set reading its sender from the corrupted run. 1 = the whole model's behaviour, 0 = none of it.
    ``memo``: a search's own (ComponentGraph.run), so sets that share their first layers' edges share them."""
    device = runs.pairs.clean.device
    weights = torch.stack([graph.weights(keep, device) for keep in keeps])
    return ((lds(graph, runs, weights, memo) - runs.corrupted_ld) / runs.gap).tolist()


def pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson correlation of two equally many numbers (nan when either is constant)."""
    return float(torch.corrcoef(torch.stack([x.flatten(), y.flatten()]).double())[0, 1])
