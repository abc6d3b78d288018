"""What each head does, named from the circuits (causal), beside what ablation and its attention pattern say.

A head in a digit's circuit gets the job the patching shows: of the kinds of pairs (analysis/engine/pairs.py) -- base,
carry, cascade for '+' -- the one whose difference the head restores most. A carry head "makes" the carry when it
reads the operands straight from the embedding, and "uses" it when it reads it from another component.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.engine.pair_runs import head_patching
from analysis.metric import Column, Context, HeadMetric, points
from analysis.metrics.ablation import Ablation
from analysis.metrics.circuit import Circuits
from analysis.metrics.roles import Roles
from model.hooks import head_label

MIN_PAIRS = 8  # a kind with fewer pairs names no role
MIN_SHARE = 0.1  # the share of a kind's difference a head must restore to be named for it


@dataclass
class CircuitRoleRow:
    layer: int
    head: int
    role: str  # from the circuits: "base add r1, makes the carry into r2"; "" when in none
    ablation: str  # what ablating it costs
    pattern: str  # the role read from its attention pattern (the roles analysis)
    verdict: str  # where the causal role and the ablation disagree, said; "agrees" otherwise


def job(kind: str, digit: str, makes: bool) -> str:
    """One kind of pair (analysis/engine/pairs.py: KINDS), for one digit, in words."""
    if kind.startswith("base"):
        return f"{kind} {digit}"
    if kind in ("carry", "borrow"):
        return f"{'makes' if makes else 'uses'} the {kind} into {digit}"
    if kind.endswith("cascade"):
        return f"{kind} into {digit}"
    if kind == "higher place":
        return f"sign flip into {digit}"
    return f"reads {kind} for {digit}"


def jobs_in_words(found: list[tuple[float, str, bool, str]]) -> list[str]:
    """A head's (share, kind, makes, digit) findings -> one phrase per kind, its digits in order, the kind it
    restores most first: ["base add r0 r1 r2", "makes the carry into r3"]."""
    groups: dict[tuple[str, bool], list[tuple[float, str]]] = {}
    for share, kind, makes, digit in found:
        groups.setdefault((kind, makes), []).append((share, digit))
    ranked = sorted(groups.items(), key=lambda g: -max(share for share, _ in g[1]))
    return [job(kind, " ".join(digit for _, digit in found_in), makes) for (kind, makes), found_in in ranked]


class CircuitRoles(HeadMetric):
    name = "circuit_roles"
    title = "Roles from the circuits"
    intro = (
        "Each head's job named from the circuits above: for each digit whose circuit it is in, the kind of "
        "change (the digit's own sum, the carry into it, a carry rippling through 9s) that it restores most when "
        "patched. Beside it, what ablating it costs and what its attention pattern suggests; where they disagree, "
        "the last column says so."
    )
    columns = (
        Column("layer", "layer"),
        Column("head", "head"),
        Column("role", "role from the circuits"),
        Column("ablation", "ablation"),
        Column("pattern", "role from the pattern"),
        Column("verdict", "agreement"),
    )
    value = "role"
    opt_in = "circuits"
    needs = (Circuits, Ablation, Roles)  # the circuits, what ablating each head costs, its role from the pattern

    def compute(self, ctx: Context) -> list[CircuitRoleRow]:
        circuits = ctx.result(Circuits)
        if not circuits:
            return []
        jobs: dict[tuple[int, int], list[tuple[float, str, bool, str]]] = {}  # (share, kind, makes, digit)
        circuits_of: dict[str, list[str]] = {}  # head -> the digits whose circuit it is in
        for found in circuits:
            runs, circuit = found.runs, found.circuit
            members = {e.sender for e in circuit.edges} | {e.receiver for e in circuit.edges}
            for name in members:
                circuits_of.setdefault(name, []).append(runs.pairs.target)
            for kind in sorted(set(runs.pairs.kinds)):
                subset = runs.subset(kind)
                if len(subset.pairs) < MIN_PAIRS or not subset.told_apart:  # too few, or none of it learned
                    continue
                restored = head_patching(ctx.module.net, subset)
                for layer in range(ctx.n_layers):
                    for head in range(ctx.n_heads):
                        name = head_label(layer, head)
                        if name in members and restored[layer, head] >= MIN_SHARE:
                            makes = all(e.sender == "embed" for e in circuit.edges if e.receiver == name)
                            jobs.setdefault((layer, head), []).append(
                                (float(restored[layer, head]), kind, makes, runs.pairs.target)
                            )
        ablation = ctx.result(Ablation)
        zero = {(r.layer, r.head): r.delta_exact_match for r in ablation if r.ablation == "zero"}
        mean = {(r.layer, r.head): r.delta_exact_match for r in ablation if r.ablation == "mean"}
        pattern = {(r.layer, r.head): r.role for r in ctx.result(Roles)}
        rows = []
        for layer in range(ctx.n_layers):
            for head in range(ctx.n_heads):
                key = (layer, head)
                named = jobs_in_words(jobs.get(key, []))
                digits = circuits_of.get(head_label(layer, head), [])
                if digits and not named:
                    named = [f"in the {', '.join(digits)} circuit{'s' if len(digits) > 1 else ''}, a small share"]
                costs = [
                    f"{100 * d[key]:+.1f} points {kind}-ablated"
                    for kind, d in (("zero", zero), ("mean", mean))
                    if key in d
                ]
                rows.append(
                    CircuitRoleRow(
                        layer,
                        head,
                        ", ".join(named),
                        "; ".join(costs),
                        pattern.get(key, ""),
                        verdict(bool(digits), zero.get(key), mean.get(key), ctx.tolerance),
                    )
                )
        return rows

    def results(self, rows: list[CircuitRoleRow], ctx: Context) -> dict:
        return {"circuit_roles": {head_label(r.layer, r.head): r.role for r in rows}}

    def note(self, row: CircuitRoleRow) -> str:
        return (row.role or "in no circuit") + ("" if row.verdict == "agrees" else f" — {row.verdict}")


def verdict(in_circuit: bool, zero: float | None, mean: float | None, tolerance: float) -> str:
    """Whether the circuits and ablation tell the same story about a head, and where not, how they differ."""
    if zero is None and mean is None:
        return "agrees"
    costly = lambda d: d is not None and -d > tolerance  # noqa: E731
    if in_circuit and not costly(zero) and not costly(mean):
        return f"in a circuit, yet ablating it costs at most {points(tolerance)}: other heads stand in for it"
    if not in_circuit and costly(mean):
        return f"in no circuit, yet mean-ablating it costs {-100 * mean:.1f} points (outside the pairs studied)"
    if not in_circuit and costly(zero):
        return "in no circuit; zeroing it costs points but its mean does not: only its average output matters"
    return "agrees"
