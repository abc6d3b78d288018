"""Each head's story in one sentence: where it looks, what removing it costs, what it writes to the answer directly
and which digits run through it, reconciled, with what a disagreement between them means.

The analyses before it each name a head their own way -- its mean pattern (roles), its ablation cost, its direct
logit attribution (dla), the digits whose patching runs through it (patching; the circuits' role when the run found
them) -- and they can disagree: a layer-1 head that "attends to its own token" may still cost 23 points, because
what it reads there was written by layer 0. :func:`head_story` says so, from the numbers alone. Its sentence is
results.json's ``head_stories``, the terminal summary's rows and the line the page writes for the head: built here,
printed there.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.metric import Column, Context, HeadMetric, learned, points
from analysis.metrics.ablation import Ablation
from analysis.metrics.circuit_roles import MIN_SHARE, CircuitRoles
from analysis.metrics.dla import ALL, DirectLogitAttribution
from analysis.metrics.patching import Patching
from analysis.metrics.roles import Roles
from data.positions import RESULT_DIGITS, positions
from model.hooks import head_label

DIRECT = 0.1  # a head "writes the answer itself" when it adds this share of the right token's logit (above average)
LOCAL = {"current token": "its own token", "previous token": "the token before"}  # patterns that read no operand


@dataclass(frozen=True)
class HeadFacts:
    """What the analyses measured of one head: the story's only input."""

    layer: int
    head: int
    n_layers: int
    pattern: str  # the roles analysis's line: "current token", "answer digit 10^k reads a and b digit 10^k ..."
    zero: float | None  # Δ exact-match when zeroed (negative: a cost); None when not measured
    mean: float | None  # Δ exact-match when mean-ablated
    direct: float | None  # logits it adds to the right token directly (dla, over all answer digits)
    logit: float | None  # the right token's logit above the average, the whole model's: what the direct parts sum to
    restores: tuple[tuple[str, float], ...] | None  # (digit, share) where patching restores >= MIN_SHARE of its logit
    # difference, largest first; None when patching studied no digit
    circuit: str | None  # the circuits' role ("" in none); None when the run found no circuits
    tolerance: float  # an exact-match loss at most this costs nothing
    exact_match: float  # the intact model's, on the same problems

    @property
    def name(self) -> str:
        return head_label(self.layer, self.head)


def looks_at(pattern: str) -> str | None:
    """Where a head with this mean pattern looks when that is no operand digit ("its own token", "[BOS]"), or None
    when its pattern reads operands (or spreads)."""
    if pattern in LOCAL:
        return LOCAL[pattern]
    if pattern.startswith("attends to ") and "·10^" not in pattern:  # a fixed position: [BOS], '=', the operator
        return pattern.removeprefix("attends to ")
    return None


def _points(cost: float) -> str:
    """An exact-match cost in points, one decimal ("23.3"); a gain (removing the head helps) says so."""
    value = round(100 * cost, 1) + 0.0  # no "-0.0"
    return f"{value:.1f}" if value >= 0 else f"a gain of {-value:.1f}"


def _restores(f: HeadFacts) -> str:
    if f.circuit is not None:
        return f"the circuits name it '{f.circuit}'" if f.circuit else "it is in no digit's circuit"
    if f.restores is None:
        return "patching studied no digit"
    if not f.restores:
        return f"patching it restores under {MIN_SHARE:.0%} of any digit's logit difference"
    return "patching it restores " + " and ".join(f"{share:.0%} of {digit}" for digit, share in f.restores[:2])


def head_story(f: HeadFacts) -> str:
    """One sentence for one head: the four measurements, then what they mean together (where they disagree, why)."""
    if not learned(f.exact_match):
        return (
            f"{f.name}: the model has not learned its task ({f.exact_match:.1%} exact-match), so no job is claimed "
            "for it: switching off a head of a model that gets little right shows little"
        )
    costs = {kind: -delta for kind, delta in (("zero", f.zero), ("mean", f.mean)) if delta is not None}
    costly = {kind for kind, cost in costs.items() if cost > f.tolerance}
    needed, where = bool(costly), looks_at(f.pattern)
    look = f"{f.name} attends mostly to {where}" if where else f"{f.name}'s mean pattern is '{f.pattern}'"
    if not costs:
        cost = "its ablation was not measured"
    elif needed:
        kind = "zero" if "zero" in costly else "mean"
        other = "mean" if kind == "zero" else "zero"
        cost = f"{'zeroing' if kind == 'zero' else 'mean-ablating'} it costs {_points(costs[kind])} points"
        if other in costs:
            cost += f" ({'mean-ablating' if other == 'mean' else 'zeroing'} it, {_points(costs[other])})"
    else:
        cost = f"removing it costs at most {points(f.tolerance)}"
    surprise = bool(costs) and (where is not None) == needed  # a head that looks at no operand yet matters, or v.v.
    share = f.direct / f.logit if f.direct is not None and f.logit is not None and f.logit > 0 else None
    writes = share is not None and share >= DIRECT
    direct = (
        f"it adds {f.direct:+.2f} of the right token's {f.logit:.1f} logits directly"
        if share is not None
        else "its direct effect was not measured"
    )
    causal = bool(f.circuit) if f.circuit is not None else None if f.restores is None else bool(f.restores)

    meaning = []
    if needed:
        if costly == {"zero"} and "mean" in costs:  # its varying part is not needed: its average is
            meaning.append(
                f"only its average output matters (replaced by its mean, it costs {_points(costs['mean'])} points), "
                "so the rest relies on the constant it adds, not on what it reads"
            )
        else:
            if where and f.layer > 0:
                earlier = "the carry" if "carry" in (f.circuit or "") else "a result (a carry, a digit's sum)"
                meaning.append(
                    f"what it reads at {where} was written there by the layers below, so it can pass on {earlier} "
                    "computed earlier while looking at no operand"
                )
            elif where:
                meaning.append(f"in layer 0 nothing is computed yet at {where}: it matters for what it writes from it")
            else:
                meaning.append("its pattern is its job")
            if causal is False:
                meaning.append("no studied digit runs through it, so its work lies outside the pairs patching tried")
        if writes:
            meaning.append("it writes the answer itself")
        elif share is not None and share <= -DIRECT:
            meaning.append(
                "it pushes against the right token directly, so what it does for the answer goes through "
                "the layers after it"
            )
        elif share is not None:
            later = "the MLP after it" if f.layer == f.n_layers - 1 else "the MLPs and layers after it"
            meaning.append(f"it writes the answer through {later}, not directly")
    elif costs:
        if causal or writes:
            meaning.append("other heads stand in for it when it is gone, so it is useful but not needed")
        else:
            meaning.append("nothing measured here needs it, so it can be pruned")
    facts = f"{look}{', yet ' if surprise else ', and '}{cost}; {direct}, and {_restores(f)}"
    return f"{facts}: {'; '.join(meaning)}" if meaning else facts


@dataclass
class HeadStoryRow:
    layer: int
    head: int
    story: str


class HeadStory(HeadMetric):
    name = "head_story"
    title = "Each head in one sentence"
    intro = (
        "Where each head looks (its mean pattern), what switching it off costs, what it adds to the right answer "
        "token directly, and which digits run through it (patching), in one sentence that says what it means when "
        "they disagree: a head that looks at its own token can still carry a result computed in the layer below."
    )
    columns = (Column("layer", "layer"), Column("head", "head"), Column("story", "story"))
    value = "story"
    view = "table"  # sentences: a table, not a heatmap
    needs = (Roles, Ablation, DirectLogitAttribution, Patching, CircuitRoles)  # the circuit roles when found

    def compute(self, ctx: Context) -> list[HeadStoryRow]:
        facts = head_facts(ctx)
        return [HeadStoryRow(f.layer, f.head, head_story(f)) for f in facts]

    def results(self, rows: list[HeadStoryRow], ctx: Context) -> dict:
        return {"head_stories": {head_label(r.layer, r.head): r.story for r in rows}}

    def summary(self, rows: list[HeadStoryRow], ctx: Context) -> list[tuple[str, str]]:
        return [("each head" if i == 0 else "", r.story) for i, r in enumerate(rows)]

    def note(self, row: HeadStoryRow) -> str:
        return row.story

    def facts(self, rows: list[HeadStoryRow], ctx: Context) -> dict:
        return {"headline": True}  # the page leads with its note for the head (analysis/report_page.js)


def head_facts(ctx: Context) -> list[HeadFacts]:
    """Every head's facts, from the other analyses' rows (the circuits' roles only when the run finds circuits:
    they are opt-in and slow, ``analysis.circuits``)."""
    pattern = {(r.layer, r.head): r.role for r in ctx.result(Roles)}
    ablation = {(r.layer, r.head, r.ablation): r.delta_exact_match for r in ctx.result(Ablation)}
    direct = {(r.layer, r.head): r.direct_logit for r in ctx.result(DirectLogitAttribution) if r.place == ALL}
    restores: dict[tuple[int, int], list[tuple[str, float]]] = {}
    patching = ctx.result(Patching)  # [] when the model tells no digit's pairs apart
    for r in patching:
        if r.restored >= MIN_SHARE:
            restores.setdefault((r.layer, r.head), []).append((r.digit, r.restored))
    circuit_rows = ctx.result(CircuitRoles) if ctx.circuits else None
    circuit = {(r.layer, r.head): r.role for r in circuit_rows} if circuit_rows else None
    logit = right_token_logit(ctx)
    return [
        HeadFacts(
            layer,
            head,
            ctx.n_layers,
            pattern.get((layer, head), ""),
            ablation.get((layer, head, "zero")),
            ablation.get((layer, head, "mean")),
            direct.get((layer, head)),
            logit,
            tuple(sorted(restores.get((layer, head), []), key=lambda found: -found[1])) if patching else None,
            None if circuit is None else circuit.get((layer, head), ""),
            ctx.tolerance,
            ctx.evaluator.intact.exact_match,
        )
        for layer in range(ctx.n_layers)
        for head in range(ctx.n_heads)
    ]


def right_token_logit(ctx: Context) -> float:
    """The right answer digit's logit above the average logit, averaged over the problems and answer digits: what
    every component's direct logit attribution (heads, MLPs, embeddings, biases) adds up to."""
    fmt, where = ctx.fmt, positions(ctx.fmt)
    queries = [p - 1 for p in range(fmt.prompt_len, fmt.prompt_len + fmt.answer_len) if where[p].kind in RESULT_DIGITS]
    logits = ctx.cache.logits[:, queries].float()  # (N, Q, vocab)
    right = ctx.problems[:, [q + 1 for q in queries]].to(logits.device)  # (N, Q)
    return float((logits.gather(-1, right.unsqueeze(-1)).squeeze(-1) - logits.mean(dim=-1)).mean())
