"""Beyond the trained length: exact-match by operand length, for a model that can address longer problems than it
trained on (``model.place_offset``); nothing for a model that cannot.

Problems of width w have both operands exactly w digits long (a leading digit that is not 0), drawn with a seeded
``random.Random`` per (operator, width): Python integers, so any width can be written. Widths within the trained
range are drawn at random too (3-digit and shorter problems were almost all trained on: there the figure shows
the model's training fit, beyond it what it generalised).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from analysis.length_figure import length_curves
from analysis.metric import Analysis, Column, Context
from analysis.progress import track
from data.division import tokenizer_for
from data.expressions import Problem
from data.problems import MASTERED
from data.short_operand import b_digits
from model.calculator import Calculator


@dataclass
class LengthRow:
    operator: str
    digits: int  # both operands' length
    trained: bool  # within the lengths the model trained on
    n: int
    exact_match: float
    digit_accuracy: float  # share of answer tokens right (padding zeros and sign included)
    seconds: float  # to answer them (greedy decoding, in batches that fit: model/calculator.py)


def long_problems(
    op: str, width: int, n: int, seed: int = 0, larger_first: bool = False, b_digits: int = 0
) -> list[Problem]:
    """n problems ``a op b`` with both operands exactly ``width`` digits; the same for the same arguments.
    larger_first: a '-' problem's operands in the order a >= b (``ProblemFormat.larger_first``); b_digits: b exactly
    that many digits instead (a model trained on a short b: data/short_operand.py)."""
    rng = random.Random(f"{seed}:{op}:{width}")
    exactly = lambda digits: (0 if digits == 1 else 10 ** (digits - 1), 10**digits)  # noqa: E731
    (low, high), (b_low, b_high) = exactly(width), exactly(min(b_digits, width) or width)
    pairs = [(rng.randrange(low, high), rng.randrange(b_low, b_high)) for _ in range(n)]
    if larger_first and op == "-":
        pairs = [(max(a, b), min(a, b)) for a, b in pairs]
    return [Problem(a, op, b) for a, b in pairs]


LADDER = (20, 30, 50, 100, 200, 500, 1000)  # widths beyond every one of 1..4x trained, roughly log-spaced
LONG = 200  # widths up to this get the full number of problems; longer ones fewer (their cost grows as length^2)
LONG_TOKENS = 1_205  # sequences up to this long (N x 2 at 200 digits) get the full number; longer ones fewer
MOST_TOKENS = 8_000  # no longer sequence is asked (a 1,000-digit N x 2 is 6,005 tokens; a 100 x 100 product's
# running product 20,303)


def length_widths(trained: int, longest: int, tokens=lambda width: 0) -> list[int]:
    """The widths the analysis asks: every one from 1 to 4x the trained width (as far as ``longest``, and as far as
    4x the trained width's tokens), then :data:`LADDER` up to ``longest`` and :data:`MOST_TOKENS` -- a model with
    no table of places is asked up to 1,000 digits. ``tokens``: a width's sequence length (a working whose lines
    grow with the width makes it grow as width^2)."""
    every = [w for w in range(1, min(longest, 4 * trained) + 1) if tokens(w) <= 4 * tokens(trained)]
    return every + [w for w in LADDER if every[-1] < w <= longest and tokens(w) <= MOST_TOKENS]


def problems_at(width: int, n: int, tokens: int = 0) -> int:
    """How many problems a width gets: ``n`` up to :data:`LONG` digits, then n / 5 at 500 and n / 10 at 1,000; and
    at most n * LONG_TOKENS / tokens, for sequences of more than :data:`LONG_TOKENS` tokens."""
    by_width = n if width <= LONG else max(1, n * LONG // (2 * width))
    return min(by_width, max(1, n * LONG_TOKENS // max(tokens, LONG_TOKENS)))


def accuracy_by_length(calc, widths: list[int], n: int, seed: int = 0) -> list[LengthRow]:
    """Greedy exact-match and digit accuracy of ``calc`` (a :class:`model.calculator.Calculator`) per operator and
    width: every answer token the model writes compared with the true one."""
    rows, jobs = [], [(op, width) for op in calc.fmt.operators for width in widths]
    for op, width in track(jobs, "length", part=lambda job: f"'{job[0]}' at {job[1]} digits"):  # terminal only
        tokens = calc.fmt.at_width(width).seq_len
        problems = long_problems(
            op, width, problems_at(width, n, tokens), seed, calc.fmt.larger_first, b_digits(calc.fmt)
        )
        fmt = calc.fmt.at_width(calc.width_of(problems[0]))
        seqs = calc.encode(problems, fmt)  # (n, seq_len)
        start = time.perf_counter()
        written = calc.generate(fmt.prompt_of(seqs), fmt=fmt)  # (n, answer_len)
        seconds = round(time.perf_counter() - start, 2)
        exact = fmt.exact_match(written, seqs).float().mean()
        right = (written == fmt.answer_of(seqs)).float().mean()  # every answer token, one by one
        trained = width <= calc.trained_digits
        rows.append(LengthRow(op, width, trained, len(problems), float(exact), float(right), seconds))
    return rows


def longest_learned(rows: list[LengthRow], op: str, threshold: float = MASTERED) -> int:
    """The longest width w such that every width up to w is right at least ``threshold`` of the time (0: none)."""
    longest = 0
    for row in sorted((r for r in rows if r.operator == op), key=lambda r: r.digits):
        if row.exact_match < threshold:
            break
        longest = row.digits
    return longest


class Length(Analysis):
    name = "length"
    title = "Beyond the trained length"
    intro = (
        "Exact-match on problems whose operands both have the given number of digits, from 1 to as many as the "
        "model can address (every length to 4x the trained one, then 20, 30, 50, 100, 200, 500 and 1,000 digits, as "
        "far as 8,000 tokens: a working that grows with both operands stops sooner). The shaded "
        "range is the lengths it trained on; beyond it, the model adds numbers longer than any it has seen, or not."
    )
    columns = (
        Column("operator", "operator"),
        Column("digits", "digits"),
        Column("trained", "trained length"),
        Column("n", "problems"),
        Column("exact_match", "exact-match", "fraction"),
        Column("digit_accuracy", "digit accuracy", "fraction"),
        Column("seconds", "seconds to answer"),
    )
    figure_key = "curve"

    def compute(self, ctx: Context) -> list[LengthRow]:
        calc = Calculator(ctx.module.net, ctx.fmt, tokenizer_for(ctx.fmt))
        if calc.longest <= calc.trained_digits or not ctx.length_problems:
            return []
        tokens = lambda width: calc.fmt.at_width(width).seq_len  # noqa: E731
        widths = length_widths(calc.trained_digits, calc.longest, tokens)
        return accuracy_by_length(calc, widths, ctx.length_problems)

    def figure(self, rows: list[LengthRow], ctx: Context):
        return length_curves({f"'{op}'": self.curve(rows, op) for op in ctx.fmt.operators}, ctx.fmt.digits)

    @staticmethod
    def curve(rows: list[LengthRow], op: str) -> dict[int, float]:
        return {r.digits: r.exact_match for r in rows if r.operator == op}

    def results(self, rows: list[LengthRow], ctx: Context) -> dict:
        return {
            "length_exact_match": {op: self.curve(rows, op) for op in ctx.fmt.operators},
            "length_trained_digits": ctx.fmt.digits,
            "length_longest_99": min(longest_learned(rows, op) for op in ctx.fmt.operators),
        }

    def summary(self, rows: list[LengthRow], ctx: Context) -> list[tuple[str, str]]:
        lines = []
        for op in ctx.fmt.operators:
            curve, trained = self.curve(rows, op), ctx.fmt.digits
            marks = [w for w in (2 * trained, 3 * trained, 10 * trained, max(curve)) if w in curve]
            shown = ", ".join(f"{curve[w]:.1%} at {w} digits" for w in dict.fromkeys(marks))
            lines.append(
                (
                    f"length '{op}'",
                    f"{shown}; >= 99% up to {longest_learned(rows, op)} digits (trained on 1-{trained})",
                )
            )
        return lines
