"""Verification of a 10-digit adder to AdderBoard's standard, and the edge cases that have broken "100%" adders.

AdderBoard (github.com/anadim/AdderBoard) qualifies an adder of two integers in [0, 9,999,999,999] at >= 99% on
10,000 random pairs drawn with a fixed seed (2025). A random pair rarely holds a long carry chain (one in 10^k
carries through k places), so the suites below add what random pairs miss:

- ``carry patterns``: every one of the 2^10 patterns of which columns carry, three problems each;
- ``carry chains``: a carry through every place (9999999999 + 1, 5000000000 + 5000000000, 10^k - 1 + 1, ...);
- ``zeros and nines``: all-zero and all-nine operands, alone and together;
- ``sum-9 cascades``: a run of columns whose digits sum to 9, with and without a carry entering it, at every
  start and length -- the carry must ripple through the whole run, or not at all.

A model passes when it is right on >= 99% of the random pairs and on every edge case.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from analysis.progress import track
from data.expressions import Problem
from data.problems import MASTERED

DIGITS = 10
SEED = 2025
N_RANDOM = 10_000
THRESHOLD = MASTERED
RANDOM = "random pairs"


def _number(digits: list[int]) -> int:
    """Digits, units first -> the integer."""
    return sum(d * 10**i for i, d in enumerate(digits))


def random_pairs(n: int = N_RANDOM, seed: int = SEED, digits: int = DIGITS) -> list[Problem]:
    rng = random.Random(seed)
    return [Problem(rng.randint(0, 10**digits - 1), "+", rng.randint(0, 10**digits - 1)) for _ in range(n)]


def with_column_sums(sums: list[int], rng: random.Random) -> Problem:
    """A problem whose column i (units first) has digit sum ``sums[i]`` (0..18), the digits split at random."""
    a = [rng.randint(max(0, s - 9), min(9, s)) for s in sums]
    return Problem(_number(a), "+", _number([s - x for s, x in zip(sums, a, strict=True)]))


def carry_patterns(rng: random.Random, per_pattern: int = 3, digits: int = DIGITS) -> list[Problem]:
    """For each set of columns that carry (2^digits of them), problems whose columns carry exactly there."""
    problems = []
    for pattern in range(2**digits):
        for _ in range(per_pattern):
            sums, carry_in = [], 0
            for i in range(digits):
                carries = pattern >> i & 1
                # column i carries out iff its digit sum + the carry coming in is >= 10
                low, high = (10 - carry_in, 18) if carries else (0, 9 - carry_in)
                sums.append(rng.randint(low, high))
                carry_in = carries
            problems.append(with_column_sums(sums, rng))
    return problems


def carry_chains(digits: int = DIGITS) -> list[Problem]:
    """Carries through every place, and through each prefix of places."""
    top = 10**digits
    chains = [(top - 1, 1), (1, top - 1), (top // 2, top // 2), (top - 1, top - 1), (top // 2 + 1, top // 2 - 1)]
    chains += [(10**k - 1, 1) for k in range(1, digits + 1)] + [(1, 10**k - 1) for k in range(1, digits + 1)]
    chains += [(x, top - x) for x in (1, 7, 123456789, 987654321, top // 3)]  # sums to 10^digits
    return [Problem(a, "+", b) for a, b in chains if a < top and b < top]


def zeros_and_nines(digits: int = DIGITS) -> list[Problem]:
    nines = 10**digits - 1
    return [Problem(a, "+", b) for a in (0, nines) for b in (0, nines)]


def sum9_cascades(rng: random.Random, digits: int = DIGITS) -> list[Problem]:
    """Columns start..start+length-1 sum to 9; the column below sums to >= 10 (the carry ripples through the whole
    run) or to <= 8 (no carry: the run stays 9s); every other column at random."""
    problems = []
    for start in range(1, digits):
        for length in range(1, digits - start + 1):
            for carry in (True, False):
                sums = [rng.randint(0, 18) for _ in range(digits)]
                sums[start : start + length] = [9] * length
                sums[start - 1] = rng.randint(10, 18) if carry else rng.randint(0, 8)
                problems.append(with_column_sums(sums, rng))
    return problems


def suites(seed: int = SEED, digits: int = DIGITS) -> dict[str, list[Problem]]:
    """Every suite, by name, the same for the same seed."""
    rng = random.Random(seed + 1)
    return {
        RANDOM: random_pairs(N_RANDOM, seed, digits),
        "carry patterns": carry_patterns(rng, digits=digits),
        "carry chains": carry_chains(digits),
        "zeros and nines": zeros_and_nines(digits),
        "sum-9 cascades": sum9_cascades(rng, digits),
    }


@dataclass
class SuiteResult:
    name: str
    n: int
    right: int
    failures: list[dict] = field(default_factory=list)  # {"problem", "model", "truth"}

    @property
    def exact_match(self) -> float:
        return self.right / self.n

    @property
    def passed(self) -> bool:
        return self.exact_match >= THRESHOLD if self.name == RANDOM else self.right == self.n


def verify(calc, seed: int = SEED) -> list[SuiteResult]:
    """Each suite answered by ``calc`` (a :class:`model.calculator.Calculator` that adds 10-digit numbers)."""
    results = []
    for name, problems in track(suites(seed).items(), "verify", part=lambda suite: suite[0]):  # terminal only
        answers = calc.answer(problems)
        wrong = [(p, a) for p, a in zip(problems, answers, strict=True) if a.value != p.truth]
        failures = [{"problem": p.text, "model": a.value, "model_text": a.text, "truth": p.truth} for p, a in wrong]
        results.append(SuiteResult(name, len(problems), len(problems) - len(wrong), failures))
    return results
