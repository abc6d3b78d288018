"""Each head's job in one line, read from where it attends on the test problems (its mean attention pattern).

Only the queries that write the answer matter for the task: the query at position p predicts token
p + 1, so the queries from '=' up to the last answer digit produce the answer. For each head we take its
mean attention pattern over the set, look at where those queries put most of their weight, and name the
pattern with the problem's vocabulary (operand digits by decimal place, '=', the previous token, ...).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from analysis.engine.cache import ActivationCache
from analysis.metric import Column, Context, HeadMetric
from data.positions import RESULT_DIGITS, Position, positions
from data.problems import ProblemFormat
from data.working import work_lines
from model.hooks import head_label

DOMINANT = 0.5  # a key "dominates" a query when it gets at least this share of the attention
SPREAD = 0.3  # a query whose heaviest key gets less than this share reads nothing in particular: "~" (spread out)


def mean_patterns(cache: ActivationCache) -> torch.Tensor:
    """Average attention (n_layers, n_heads, T, T) over the cached problems."""
    return cache.stack("attn.hook_pattern").mean(dim=1)


def _answer_queries(fmt: ProblemFormat) -> list[tuple[int, Position]]:
    """(query position, the answer position it predicts) for every answer token."""
    roles = positions(fmt)
    return [(p - 1, roles[p]) for p in range(fmt.prompt_len, fmt.prompt_len + fmt.answer_len)]


def describe_head(fmt: ProblemFormat, pattern: torch.Tensor) -> str:
    """One line for one head's mean pattern (T, T)."""
    roles = positions(fmt)
    queries = _answer_queries(fmt)
    digit_queries = [(q, target) for q, target in queries if target.kind in RESULT_DIGITS]

    # 1. With the working of long multiplication shown: a head that fetches the digits of a partial product.
    if work_lines(fmt) and (work := _working(fmt, pattern, roles, queries)):
        return work

    # 1'. Aligned digits: the query predicting answer place k reads operand digits at place k + offset
    #    (for '*': a_i and b_j with i + j = k + offset, one partial product of long multiplication).
    if fmt.operators == "*":
        return _partial_products(pattern, roles, digit_queries) or _fixed_or_previous(pattern, roles, queries, "·")
    if fmt.operators == "/":
        return _division(pattern, roles, digit_queries) or _fixed_or_previous(pattern, roles, queries, "/")
    offsets = Counter()
    for q, target in digit_queries:
        top = pattern[q].topk(2)
        for weight, key in zip(top.values.tolist(), top.indices.tolist(), strict=True):
            role = roles[key]
            if weight >= 0.2 and role.kind in ("a", "b"):
                offsets[(role.kind, role.place - target.place)] += 1
    if offsets:
        (kind, offset), count = offsets.most_common(1)[0]
        if count >= 0.6 * len(digit_queries):
            both = offsets[("b" if kind == "a" else "a", offset)] >= 0.6 * len(digit_queries)
            reads = "a and b" if both else kind
            place = "k" if offset == 0 else f"k{offset:+d}"
            carry = "the borrow in" if fmt.operators == "-" else "the carry in"
            what = "the same place" if offset == 0 else (carry if offset == -1 else "another place")
            return f"answer digit 10^k reads {reads} digit 10^{place} ({what})"
    return _fixed_or_previous(pattern, roles, queries)


def _partial_products(pattern: torch.Tensor, roles: list[Position], digit_queries) -> str | None:
    """'*': most answer-digit queries put their top two keys on a_i and b_j with i + j = k (+ offset)."""
    offsets = Counter()
    for q, target in digit_queries:
        _, first, w2, second = _top_two(pattern[q], roles)
        if w2 >= 0.2 and {first.kind, second.kind} == {"a", "b"}:
            offsets[first.place + second.place - target.place] += 1
    if offsets:
        offset, count = offsets.most_common(1)[0]
        if count >= 0.6 * len(digit_queries):
            place = "k" if offset == 0 else f"k{offset:+d}"
            what = {0: " (a partial product)", -1: " (the partial product that carries in)"}.get(offset, "")
            return f"answer digit 10^k reads a_i and b_j with i+j={place}{what}"
    return None


DIVISION_HABITS = {  # what a query writing a division's digit may read most, and what it is in long division
    "brought down": "quotient digit 10^k reads a digit 10^k (the digit long division brings down)",
    "higher": "quotient digit 10^k reads a's digits above 10^k (the remainder so far)",
    "divisor": "the quotient's digits read the divisor b",
    "quotient": "the remainder's digits read the quotient written (a - q*b)",
    "dividend": "the remainder's digits read a's low digits (a - q*b)",
    "remainder divisor": "the remainder's digits read the divisor b (a - q*b)",
}


def _division(pattern: torch.Tensor, roles: list[Position], digit_queries) -> str | None:
    """'/': the habit most of the quotient's (or the remainder's) digit queries share, by their heaviest key
    (DIVISION_HABITS); None where no habit holds 60% of a part's queries."""
    habits: dict[str, Counter] = {"quotient": Counter(), "remainder": Counter()}
    for q, target in digit_queries:
        key = roles[int(pattern[q].argmax())]
        if pattern[q].max() < SPREAD:
            continue
        if target.kind == "quotient":
            habit = "divisor" if key.kind == "b" else None
            if key.kind == "a":
                habit = "brought down" if key.place == target.place else "higher" if key.place > target.place else None
        else:
            habit = {"b": "remainder divisor", "quotient": "quotient", "a": "dividend"}.get(key.kind)
        if habit:
            habits[target.kind][habit] += 1
    for part, counts in habits.items():
        n = sum(t.kind == part for _, t in digit_queries)
        if counts and counts.most_common(1)[0][1] >= 0.6 * n:
            return DIVISION_HABITS[counts.most_common(1)[0][0]]
    return None


def _working(fmt: ProblemFormat, pattern: torch.Tensor, roles: list[Position], queries) -> str | None:
    """show_work: the digits of each partial product q_j = a * b_j * 10^j (work lines 0, 1, 3, 5, ...) mostly read
    b_j, the line's multiplier digit, or a_(k-j), the multiplicand digit that lands on place k, or a_(k-j-1), the
    one whose product carries into it (counted where there is such a digit)."""
    read, could = Counter(), Counter()  # per habit: queries that have it, queries that could
    for q, target in queries:
        kind, j = fmt.working.line(target.line) if target.kind == "work" else (None, None)
        if kind != "product":
            continue
        key = roles[int(pattern[q].argmax())] if pattern[q].max() >= 0.3 else Position("none")
        could["multiplier"] += 1
        read["multiplier"] += key.kind == "b" and key.place == j
        for habit, place in (("multiplicand", target.place - j), ("carry", target.place - j - 1)):
            if 0 <= place < fmt.digits:
                could[habit] += 1
                read[habit] += key.kind == "a" and key.place == place
    habit = next((h for h in ("multiplier", "multiplicand", "carry") if could[h] and read[h] >= 0.6 * could[h]), None)
    return {
        None: None,
        "multiplier": "partial product a*b_j reads b_j (its line's multiplier digit)",
        "multiplicand": "partial product digit 10^k of a*b_j reads a digit 10^(k-j) (the digit it multiplies)",
        "carry": "partial product digit 10^k of a*b_j reads a digit 10^(k-j-1) (the carry in)",
    }[habit]


def _fixed_or_previous(pattern: torch.Tensor, roles: list[Position], queries, pair: str = "+") -> str:
    """Rules 2-4: a fixed position, the previous or current token, or where each answer token reads."""
    # 2. A fixed position that most answer queries look at.
    fixed = Counter(roles[int(pattern[q].argmax())].label for q, _ in queries if pattern[q].max() >= DOMINANT)
    if fixed:
        label, count = fixed.most_common(1)[0]
        if count >= 0.6 * len(queries):
            return f"attends to {label}"

    # 3. The previous token.
    previous = sum(int(pattern[q].argmax()) == q - 1 for q, _ in queries)
    if previous >= 0.6 * len(queries):
        return "previous token"
    if sum(int(pattern[q].argmax()) == q for q, _ in queries) >= 0.6 * len(queries):
        return "current token"

    # 4. Otherwise: what each answer token reads, e.g. "r0<-a0+b0 r1<-a1+b1 r2<-= r3<-~" (~ = spread out).
    return "reads " + " ".join(f"{target.short}<-{_reads(pattern[q], roles, pair)}" for q, target in queries)


def _top_two(row: torch.Tensor, roles: list[Position]) -> tuple[float, Position, float, Position]:
    """One query's two heaviest keys: (weight, role) of the first, then of the second."""
    top = row.topk(2)
    (w1, k1), (w2, k2) = zip(top.values.tolist(), top.indices.tolist(), strict=True)
    return w1, roles[k1], w2, roles[k2]


def _reads(row: torch.Tensor, roles: list[Position], pair: str = "+") -> str:
    """Where one query looks: a pair of same-place operand digits (a0+b0, or a0·b0 for '*'), one dominant key,
    or '~' (spread out)."""
    w1, first, w2, second = _top_two(row, roles)
    if w2 >= 0.2 and {first.kind, second.kind} == {"a", "b"} and first.place == second.place:
        return f"a{first.place}{pair}b{first.place}"
    return first.short if w1 >= SPREAD else "~"


def describe_heads(fmt: ProblemFormat, patterns: torch.Tensor) -> dict[tuple[int, int], str]:
    """{(layer, head): description} from mean patterns (n_layers, n_heads, T, T)."""
    n_layers, n_heads = patterns.shape[:2]
    return {
        (layer, head): describe_head(fmt, patterns[layer, head]) for layer in range(n_layers) for head in range(n_heads)
    }


@dataclass
class RoleRow:
    layer: int
    head: int
    role: str


class Roles(HeadMetric):
    name = "roles"
    title = "What each head does"
    intro = (
        "Read from each head's mean attention over the test problems: where the queries that write the answer "
        "put their weight, named with the problem's vocabulary: a2 = a's hundreds digit, b0 = b's units, r0 = the "
        "result's units; x<-y = the query that writes answer digit x reads y: r1<-a1+b1 reads a1 and b1 together "
        f"(a1·b1 for '*'), r3<-= reads the '='; ~ = spread out (no key gets {SPREAD:.0%} of its weight); "
        "^ = the start token, $ = the end token, op = the operator, ± = the sign, w1.2 = line 1 of the working at "
        "the hundreds, | = a separator in the working; in words, ans·10^2 = the answer's hundreds digit."
    )
    columns = (Column("layer", "layer"), Column("head", "head"), Column("role", "role"))
    value = "role"

    def compute(self, ctx: Context) -> list[RoleRow]:
        roles = describe_heads(ctx.fmt, mean_patterns(ctx.cache))
        return [RoleRow(layer, head, role) for (layer, head), role in roles.items()]

    def results(self, rows: list[RoleRow], ctx: Context) -> dict:
        return {"head_roles": {head_label(r.layer, r.head): r.role for r in rows}}

    def note(self, row: RoleRow) -> str:
        return row.role
