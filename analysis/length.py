"""Beyond the trained length: exact-match by operand length, on problems as long as a model can address.

Problems of width w have both operands exactly w digits long (a leading digit that is not 0), drawn with a seeded
``random.Random`` per (operator, width): Python integers, so any width can be written. Widths within the trained
range are drawn at random too (3-digit and shorter problems were almost all trained on: there the figure shows
the model's training fit, beyond it what it generalised).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from data.expressions import Problem
from data.problems import MASTERED


@dataclass
class LengthRow:
    operator: str
    digits: int  # both operands' length
    trained: bool  # within the lengths the model trained on
    n: int
    exact_match: float
    digit_accuracy: float  # share of answer tokens right (padding zeros and sign included)


def long_problems(op: str, width: int, n: int, seed: int = 0, larger_first: bool = False) -> list[Problem]:
    """n problems ``a op b`` with both operands exactly ``width`` digits; the same for the same arguments.
    larger_first: a '-' problem's operands in the order a >= b (``ProblemFormat.larger_first``)."""
    rng = random.Random(f"{seed}:{op}:{width}")
    low, high = (0 if width == 1 else 10 ** (width - 1)), 10**width
    pairs = [(rng.randrange(low, high), rng.randrange(low, high)) for _ in range(n)]
    if larger_first and op == "-":
        pairs = [(max(a, b), min(a, b)) for a, b in pairs]
    return [Problem(a, op, b) for a, b in pairs]


def accuracy_by_length(calc, widths: list[int], n: int, seed: int = 0) -> list[LengthRow]:
    """Greedy exact-match and digit accuracy of ``calc`` (a :class:`model.calculator.Calculator`) per operator and
    width: every answer token the model writes compared with the true one."""
    rows = []
    for op in calc.fmt.operators:
        for width in widths:
            problems = long_problems(op, width, n, seed, calc.fmt.larger_first)
            fmt = calc.fmt.at_width(calc.width_of(problems[0]))
            seqs = calc.encode(problems, fmt)  # (n, seq_len)
            written = calc.generate(seqs[:, : fmt.prompt_len], fmt=fmt)  # (n, answer_len)
            right = written == seqs[:, fmt.prompt_len : fmt.prompt_len + fmt.answer_len]
            rows.append(
                LengthRow(
                    op,
                    width,
                    width <= calc.trained_digits,
                    n,
                    float(right.all(dim=1).float().mean()),
                    float(right.float().mean()),
                )
            )
    return rows


def longest_learned(rows: list[LengthRow], op: str, threshold: float = MASTERED) -> int:
    """The longest width w such that every width up to w is right at least ``threshold`` of the time (0: none)."""
    longest = 0
    for row in sorted((r for r in rows if r.operator == op), key=lambda r: r.digits):
        if row.exact_match < threshold:
            break
        longest = row.digits
    return longest
