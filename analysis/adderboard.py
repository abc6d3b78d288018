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

At length (``digits`` > 10, ``python verify.py RUN --digits 100``) the same suites are drawn at that width, sampled
where their count grows with it (1,000 random pairs; 1,024 random carry patterns; the cascades at :data:`RUNS`
lengths), plus what only a long problem holds: runs of zeros and nines inside random numbers, and operands of
very different lengths (a ``digits``-digit number plus a short one, both ways).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from analysis.progress import track
from data.expressions import Problem
from data.problems import MASTERED
from data.text import allow_digits

DIGITS = 10
SEED = 2025
N_RANDOM = 10_000
RANDOM = "random pairs"


def _number(digits: list[int]) -> int:
    """Digits, units first -> the integer (through text: a sum of d * 10**i costs digits squared)."""
    allow_digits(len(digits))
    return int("".join(map(str, reversed(digits))) or "0")


N_RANDOM_LONG = 1_000  # random pairs at length: a 100-digit problem costs ten 10-digit ones
PATTERNS_LONG = 1_024  # carry patterns at length: a random sample of the 2^digits
RUNS = (1, 2, 3, 5, 10, 20, 50, 100, 200, 500)  # sum-9 cascade lengths at length


def random_pairs(n: int = N_RANDOM, seed: int = SEED, digits: int = DIGITS) -> list[Problem]:
    rng = random.Random(seed)
    return [Problem(rng.randint(0, 10**digits - 1), "+", rng.randint(0, 10**digits - 1)) for _ in range(n)]


def with_column_sums(sums: list[int], rng: random.Random) -> Problem:
    """A problem whose column i (units first) has digit sum ``sums[i]`` (0..18), the digits split at random."""
    a = [rng.randint(max(0, s - 9), min(9, s)) for s in sums]
    return Problem(_number(a), "+", _number([s - x for s, x in zip(sums, a, strict=True)]))


def carry_patterns(rng: random.Random, per_pattern: int = 3, digits: int = DIGITS) -> list[Problem]:
    """For each set of columns that carry (2^digits of them; beyond 10 digits :data:`PATTERNS_LONG` drawn at random),
    problems whose columns carry exactly there."""
    problems = []
    every = digits <= DIGITS
    for pattern in range(2**digits) if every else (rng.getrandbits(digits) for _ in range(PATTERNS_LONG)):
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
    run) or to <= 8 (no carry: the run stays 9s); every other column at random. Every start and length up to 10
    digits; beyond, 20 starts at random, each with the lengths of :data:`RUNS` that fit."""
    problems, every = [], digits <= DIGITS
    for start in range(1, digits) if every else sorted(rng.sample(range(1, digits), 20)):
        for length in range(1, digits - start + 1) if every else [k for k in RUNS if k <= digits - start]:
            for carry in (True, False):
                sums = [rng.randint(0, 18) for _ in range(digits)]
                sums[start : start + length] = [9] * length
                sums[start - 1] = rng.randint(10, 18) if carry else rng.randint(0, 8)
                problems.append(with_column_sums(sums, rng))
    return problems


def runs_of_zeros_and_nines(rng: random.Random, digits: int) -> list[Problem]:
    """Random ``digits``-digit operands with a long run of 0s or 9s inside (a third to all but one of the places)."""

    def number(run: str, start: int) -> int:  # random digits, ``run`` written over them from ``start``
        d = [str(rng.randint(0, 9)) for _ in range(digits)]
        d[start : start + len(run)] = run
        return int("".join(d))

    problems = []
    for digit in "09":
        for _ in range(50):
            run = digit * rng.randint(digits // 3, digits - 1)
            start = rng.randint(0, digits - len(run))
            problems.append(Problem(number(run, start), "+", number(run, start)))
    return problems


def different_lengths(rng: random.Random, digits: int) -> list[Problem]:
    """A ``digits``-digit operand and one of 1, 2, 5, 10, ... digits, in both orders, three of each."""
    short = [k for k in (1, 2, 5, 10, 20, 50) if k < digits]
    pairs = [(rng.randrange(10 ** (digits - 1), 10**digits), rng.randrange(10**k)) for k in short for _ in range(3)]
    return [Problem(a, "+", b) for a, b in pairs] + [Problem(b, "+", a) for a, b in pairs]


def suites(seed: int = SEED, digits: int = DIGITS) -> dict[str, list[Problem]]:
    """Every suite, by name, the same for the same seed and width; past 10 digits, sampled and with the long
    problems' own suites (the module's docstring)."""
    rng = random.Random(seed + 1)
    long = digits > DIGITS
    out = {
        RANDOM: random_pairs(N_RANDOM_LONG if long else N_RANDOM, seed, digits),
        "carry patterns": carry_patterns(rng, per_pattern=1 if long else 3, digits=digits),
        "carry chains": carry_chains(digits),
        "zeros and nines": zeros_and_nines(digits),
        "sum-9 cascades": sum9_cascades(rng, digits),
    }
    if long:
        out["runs of 0s and 9s"] = runs_of_zeros_and_nines(rng, digits)
        out["mixed lengths"] = different_lengths(rng, digits)
    return out


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
        return self.exact_match >= MASTERED if self.name == RANDOM else self.right == self.n


def verify(calc, seed: int = SEED, digits: int = DIGITS) -> list[SuiteResult]:
    """Each suite at ``digits`` answered by ``calc`` (a :class:`model.calculator.Calculator` that adds numbers
    that long)."""
    results = []
    for name, problems in track(suites(seed, digits).items(), "verify", part=lambda suite: suite[0]):  # terminal only
        answers = calc.answer(problems)
        wrong = [(p, a) for p, a in zip(problems, answers, strict=True) if a.value != p.truth]
        failures = [{"problem": p.text, "model": a.value, "model_text": a.text, "truth": p.truth} for p, a in wrong]
        results.append(SuiteResult(name, len(problems), len(problems) - len(wrong), failures))
    return results
