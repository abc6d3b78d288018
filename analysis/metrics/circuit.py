"""The circuit of each written digit: the fewest edges (head -> head query / key / value, head -> MLP, ... -> logits)
that recover 90% of the digit's clean - corrupted logit difference with every other edge ablated, each edge's exact
path-patching effect beside its gradient estimate (analysis/engine/pair_runs.py).

    1. rank every edge by its exact path-patching effect (edge_patching)
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

from analysis.engine.graph import ComponentGraph, Edge
from analysis.engine.pair_runs import PairRuns, edge_attribution, edge_patching, faithfulness, pearson
from analysis.metric import Analysis, Column, Context, Product
from analysis.plots import circuit_graphs
from model.hooks import head_label

THRESHOLD = 0.9  # the share of the metric gap a circuit must recover
N_RANDOM = 30  # random edge sets per circuit, for the baseline


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
    memo: dict = {}  # the first layers' outputs, shared by the sets below that agree on the edges into them

    def faithful(edges: list[Edge]) -> float:
        return faithfulness(graph, runs, [set(edges)], memo)[0]

    size = next(  # the shortest prefix of the ranking that is faithful enough (all of it when none is)
        (n for n in range(1, len(order)) if faithful(order[:n]) >= threshold), len(order)
    )
    kept = order[:size]
    for edge in reversed(order[:size]):  # weakest first
        rest = [e for e in kept if e != edge]
        if faithful(rest) >= threshold:
            kept = rest
    rng = random.Random(seed)
    baseline = torch.tensor(
        faithfulness(graph, runs, [set(rng.sample(graph.edges, len(kept))) for _ in range(N_RANDOM)])
    )
    return Circuit(
        edges=kept,
        faithfulness=faithful(kept),
        random_mean=float(baseline.mean()),
        random_std=float(baseline.std()),
        n_edges=len(graph),
        n_head_to_head=sum(e.head_to_head for e in graph.edges),
    )


@dataclass
class DigitCircuit:
    """One written digit's circuit, and every edge's effect it was found from."""

    runs: PairRuns
    lost: torch.Tensor  # (n_edges,) share of the logit difference lost when that edge alone reads the corrupted run
    attributed: torch.Tensor  # (n_edges,) the same, estimated from gradients (integrated over the edge weights)
    circuit: Circuit


class Circuits(Product[list[DigitCircuit]]):
    """Every told-apart digit's circuit (what the circuit table, its figure and the circuit roles read)."""

    def compute(self, ctx: Context) -> list[DigitCircuit]:
        found = []
        for runs in ctx.digit_runs:
            lost, attributed = edge_patching(ctx.graph, runs), edge_attribution(ctx.graph, runs)
            found.append(DigitCircuit(runs, lost, attributed, find_circuit(ctx.graph, runs, lost)))
        return found


@dataclass
class EdgeRow:
    digit: str  # the studied digit
    sender: str  # "embed", "L0h2", "mlp0"
    receiver: str  # "L1h3", "mlp1", "logits"
    input: str  # the receiver's input: q, k, v (a head's) or in
    lost: float  # share of the logit difference lost when this edge alone reads the corrupted run
    attributed: float  # the same, estimated from gradients (integrated over the edge weights)
    in_circuit: bool


def node_layout(graph) -> list[dict]:
    """Where the page and the figure draw each component: x across a layer's heads, y up through the layers."""
    nodes = [{"name": "embed", "x": (graph.n_heads - 1) / 2, "y": 0.0}]
    for layer in range(graph.n_layers):
        nodes += [{"name": head_label(layer, h), "x": float(h), "y": 1.0 + 2 * layer} for h in range(graph.n_heads)]
        nodes.append({"name": f"mlp{layer}", "x": (graph.n_heads - 1) / 2, "y": 2.0 + 2 * layer})
    nodes.append({"name": "logits", "x": (graph.n_heads - 1) / 2, "y": 1.0 + 2 * graph.n_layers})
    return nodes


class CircuitAnalysis(Analysis):
    name = "circuit"
    title = "Circuits"
    intro = (
        f"For each digit the model writes, the fewest edges between components (the embedding, each head's query, "
        f"key and value inputs, the MLPs, the logits) that recover {THRESHOLD:.0%} of the clean − corrupted logit "
        "difference when every other edge reads the corrupted problem instead: found by exact path patching, checked "
        "against random edge sets of the same size. Line width: how much of the difference the edge alone carries."
    )
    columns = (
        Column("digit", "digit"),
        Column("sender", "from"),
        Column("receiver", "to"),
        Column("input", "input"),
        Column("lost", "lost when patched", "fraction"),
        Column("attributed", "attribution estimate", "fraction"),
        Column("in_circuit", "in the circuit"),
    )
    figure_key = "graph"
    view = "graph"
    opt_in = "circuits"
    needs = (Circuits,)

    def compute(self, ctx: Context) -> list[EdgeRow]:
        rows = []
        for found in ctx.result(Circuits):
            digit, members = found.runs.pairs.target, set(found.circuit.edges)
            rows += [
                EdgeRow(digit, e.sender, e.receiver, e.input, float(lost), float(est), e in members)
                for e, lost, est in zip(ctx.graph.edges, found.lost, found.attributed, strict=True)
            ]
        return rows

    def figure(self, rows: list[EdgeRow], ctx: Context):
        return circuit_graphs(rows, node_layout(ctx.graph), self.circuits(ctx))

    @staticmethod
    def circuits(ctx: Context) -> dict[str, dict]:
        """Per digit: its circuit's size, faithfulness and random baseline (results.json's "circuits")."""
        found = {f.runs.pairs.target: f.circuit for f in ctx.result(Circuits)}
        return {
            digit: {
                "edges": len(c.edges),
                "fraction": c.fraction,
                "head_to_head": c.head_to_head,
                "head_to_head_total": c.n_head_to_head,
                "faithfulness": c.faithfulness,
                "random_mean": c.random_mean,
                "random_std": c.random_std,
            }
            for digit, c in found.items()
        }

    def results(self, rows: list[EdgeRow], ctx: Context) -> dict:
        circuits = self.circuits(ctx)
        exact, estimate = torch.tensor([r.lost for r in rows]), torch.tensor([r.attributed for r in rows])
        return {
            "circuits": circuits,
            "circuit_faithfulness": min(c["faithfulness"] for c in circuits.values()),
            "circuit_fraction": max(c["fraction"] for c in circuits.values()),
            "attribution_correlation_edges": pearson(exact, estimate),
        }

    def facts(self, rows: list[EdgeRow], ctx: Context) -> dict:
        return {
            "nodes": node_layout(ctx.graph),
            "circuits": self.circuits(ctx),
            # the page's graph view: which columns hold the edge, its width, its drawing and its membership
            "variant": "digit",
            "source": "sender",
            "target": "receiver",
            "port": "input",
            "value": "lost",
            "member": "in_circuit",
        }

    def summary(self, rows: list[EdgeRow], ctx: Context) -> list[tuple[str, str]]:
        c = self.circuits(ctx).values()
        sizes = sorted(x["edges"] for x in c)
        total = next(iter(c))["edges"] / next(iter(c))["fraction"]
        return [
            (
                "circuits",
                f"{sizes[0]}–{sizes[-1]} of {total:.0f} edges recover ≥ {min(x['faithfulness'] for x in c):.0%} of "
                f"each digit's logit difference (random sets as large: {max(x['random_mean'] for x in c):.0%})",
            )
        ]
