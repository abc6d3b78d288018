"""Sums of many operands beyond the trained size: exact-match with n operands of n digits each, for a model trained
on sums (``data.operands``, data/sums.py), as far as :data:`SIZES` -- half the problems uniform, half carry-heavy.

A carry-heavy sum makes every other line of its running sum carry across its whole width: an operand that brings
the sum's low digits to all 9s, then one that carries through them. Uniform operands almost never do that.
"""

from __future__ import annotations

import random
import time

from data.sums import SumProblem
from model.calculator import Calculator

SIZES = (10, 20, 30, 50)  # n operands of n digits (50 x 50: 5,301 tokens)


def long_sums(terms: int, digits: int, n: int, seed: int = 0) -> list[list[int]]:
    """n sums of ``terms`` operands of exactly ``digits`` digits; the same for the same arguments."""
    rng = random.Random(f"{seed}:sum:{terms}:{digits}")
    low, high = (0 if digits == 1 else 10 ** (digits - 1)), 10**digits
    return [[rng.randrange(low, high) for _ in range(terms)] for _ in range(n)]


def carry_heavy(terms: int, digits: int, n: int, seed: int = 0) -> list[list[int]]:
    """n sums of ``terms`` operands of exactly ``digits`` digits whose running sum carries across its whole width
    on every other line (a 9-filling operand, then one whose units digit is not 0); the same for the same
    arguments."""
    rng, top = random.Random(f"{seed}:carry:{terms}:{digits}"), 10**digits
    low = 0 if digits == 1 else 10 ** (digits - 1)
    out = []
    for _ in range(n):
        total, operands = 0, []
        for j in range(terms):
            x = top - 1 - total % top  # brings the sum's low digits to all 9s: `digits` long, as the carrier chose
            while j % 2 and (x % 10 == 0 or x < low or (total + x) % top > top - 1 - low):  # the carrier: a units
                x = rng.randrange(low, top)  # digit that starts the carry, and a sum the next fill has digits for
            operands.append(x)
            total += x
        out.append(operands)
    return out


def sum_problems(size: int, n: int, seed: int = 0) -> dict[str, list[SumProblem]]:
    """n sums of ``size`` operands of ``size`` digits: half uniform, half carry-heavy, by kind."""
    drawn = {"uniform": long_sums(size, size, n // 2, seed), "carry_heavy": carry_heavy(size, size, n - n // 2, seed)}
    return {kind: [SumProblem(tuple(operands)) for operands in sums] for kind, sums in drawn.items()}


def accuracy_by_size(calc: Calculator, sizes=SIZES, n: int = 200, seed: int = 0) -> dict[str, dict]:
    """Per size (as text): exact-match over all n, digit accuracy, exact-match of each half, and the seconds."""
    rows = {}
    for size in sizes:
        started = time.perf_counter()
        drawn = sum_problems(size, n, seed)
        halves = {kind: calc.evaluate(problems, show_mistakes=0) for kind, problems in drawn.items()}
        both = {
            key: sum(r[key] * r["n_problems"] for r in halves.values()) / n for key in ("exact_match", "digit_accuracy")
        }
        rows[str(size)] = {
            "n": n,
            **both,
            **{f"{kind}_exact_match": r["exact_match"] for kind, r in halves.items()},
            "seconds": round(time.perf_counter() - started, 2),
        }
    return rows
