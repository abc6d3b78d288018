"""A circuit: the fewest edges that carry a studied digit's computation, and how faithful they are.

    1. rank every edge by its exact path-patching effect (analysis/patching.py: edge_patching)
    2. take edges in that order until, with every other edge ablated (read from the corrupted run), they recover
       at least ``threshold`` of the metric gap
    3. drop each kept edge in turn, weakest first, when the rest still recover ``threshold`` (ACDC's pruning pass)
    4. baseline: random edge sets of the same size, the same measurement (mean and spread)

The result is a small sufficient set found greedily, not a proven minimum.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from analysis.graph import ComponentGraph, Edge
from analysis.patching import PairRuns, faithfulness

THRESHOLD = 0.9  # the share of the metric gap a circuit must recover
N_RANDOM = 30  # random edge sets per circuit, for the baseline
CHUNK = 16  # edge sets measured in one batched pass


@dataclass
class Circuit:
    edges: list[Edge]  # strongest first
    faithfulness: float  # share of the gap it recovers alone
    random_mean: float  # the same for random sets of as many edges
    random_std: float
    n_edges: int  # edges in the whole graph
    n_head_to_head: int  # head -> head edges in the whole graph

    @property
    def fraction(self) -> float:
        return len(self.edges) / self.n_edges

    @property
    def head_to_head(self) -> int:
        return sum(e.head_to_head for e in self.edges)


def find_circuit(
    graph: ComponentGraph, runs: PairRuns, effects: torch.Tensor, threshold: float = THRESHOLD, seed: int = 0
) -> Circuit:
    """The circuit of one set of pairs, from each edge's exact effect (n_edges,)."""
    order = [graph.edges[i] for i in effects.abs().argsort(descending=True).tolist()]
    size = len(order)
    for first in range(0, len(order), CHUNK):  # the shortest prefix of the ranking that is faithful enough
        sizes = range(first + 1, min(first + CHUNK, len(order)) + 1)
        scores = faithfulness(graph, runs, [set(order[:n]) for n in sizes])
        good = [n for n, score in zip(sizes, scores, strict=True) if score >= threshold]
        if good:
            size = good[0]
            break
    kept = order[:size]
    for edge in reversed(order[:size]):  # weakest first
        rest = [e for e in kept if e != edge]
        if faithfulness(graph, runs, [set(rest)])[0] >= threshold:
            kept = rest
    rng = random.Random(seed)
    baseline = torch.tensor(
        faithfulness(graph, runs, [set(rng.sample(graph.edges, len(kept))) for _ in range(N_RANDOM)])
    )
    return Circuit(
        edges=kept,
        faithfulness=faithfulness(graph, runs, [set(kept)])[0],
        random_mean=float(baseline.mean()),
        random_std=float(baseline.std()),
        n_edges=len(graph),
        n_head_to_head=sum(e.head_to_head for e in graph.edges),
    )
