"""The circuit of each written digit: the fewest edges (head -> head query / key / value, head -> MLP, ... -> logits)
that recover 90% of the digit's clean - corrupted logit difference with every other edge ablated
(analysis/circuit.py), each edge's exact path-patching effect beside its gradient estimate (analysis/patching.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from analysis.circuit import THRESHOLD, Circuit, find_circuit
from analysis.metric import Analysis, Column, Context
from analysis.metrics.patching import digit_runs
from analysis.patching import edge_attribution, edge_patching, pearson
from analysis.plots import circuit_graphs


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
        nodes += [{"name": f"L{layer}h{h}", "x": float(h), "y": 1.0 + 2 * layer} for h in range(graph.n_heads)]
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

    def compute(self, ctx: Context) -> list[EdgeRow]:
        rows, circuits = [], {}
        for runs in digit_runs(ctx):
            graph = ctx.shared["graph"]
            exact, estimate = edge_patching(graph, runs), edge_attribution(graph, runs)
            circuit = circuits[runs.pairs.target] = find_circuit(graph, runs, exact)
            members = set(circuit.edges)
            rows += [
                EdgeRow(runs.pairs.target, e.sender, e.receiver, e.input, float(lost), float(est), e in members)
                for e, lost, est in zip(graph.edges, exact, estimate, strict=True)
            ]
        ctx.shared["circuits"] = circuits
        return rows

    def figure(self, rows: list[EdgeRow], ctx: Context):
        return circuit_graphs(rows, node_layout(ctx.shared["graph"]), self.circuits(ctx))

    @staticmethod
    def circuits(ctx: Context) -> dict[str, dict]:
        """Per digit: its circuit's size, faithfulness and random baseline (results.json's "circuits")."""
        found: dict[str, Circuit] = ctx.shared.get("circuits", {})
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
            "nodes": node_layout(ctx.shared["graph"]),
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
