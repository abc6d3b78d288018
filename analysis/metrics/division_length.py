"""Beyond the trained length, divisions included: analysis/metrics/length.py's analysis, with a division's problems
drawn here -- never a zero divisor, and at every width the hard divisions first (all nines, divisors 7, 9 and 99,
exact multiples, zeros, a dividend smaller than its divisor). Registered in its place (analysis/registry.py).

length.py's own loop draws its problems itself, and the docs' length figure is measured from that file as it is;
its :func:`~analysis.metrics.length.accuracy_by_length` is repeated below with the draw as an argument until that
figure is measured again (``python docs/regenerate.py --only length``) and the two become one.
"""

from __future__ import annotations

import random
import time

from analysis.metrics import length
from analysis.progress import track
from data.division import tokenizer_for
from data.expressions import Problem
from data.short_operand import b_digits
from model.calculator import Calculator


def long_problems(
    op: str, width: int, n: int, seed: int = 0, larger_first: bool = False, b_digits: int = 0
) -> list[Problem]:
    """As :func:`analysis.metrics.length.long_problems`; a division's b from 1 up, the hard divisions first."""
    if op != "/":
        return length.long_problems(op, width, n, seed, larger_first, b_digits)
    rng = random.Random(f"{seed}:{op}:{width}")
    low, b_high = 0 if width == 1 else 10 ** (width - 1), 10 ** (min(b_digits, width) or width)
    b_low = 1 if b_digits <= 1 or width == 1 else 10 ** (min(b_digits, width) - 1)  # never a zero divisor
    pairs = [(rng.randrange(low, 10**width), rng.randrange(b_low, b_high)) for _ in range(n)]
    return [Problem(a, op, b) for a, b in (division_edges(width, b_high, rng) + pairs)[:n]]


def division_edges(width: int, b_high: int, rng: random.Random) -> list[tuple[int, int]]:
    """The divisions every width is asked first (a of exactly ``width`` digits, b from 1 to b_high - 1): a of all
    nines by 7, 9, 99 and the largest b; exact multiples (remainder 0); a of one and zeros, and zeros inside a; a
    dividend smaller than its divisor, where the widths allow one."""
    nines, top = 10**width - 1, b_high - 1
    small = [b for b in (7, 9, 99) if b <= top] or [top]
    edges = [(nines, b) for b in dict.fromkeys([*small, top])]
    for b in (small[0], top):  # a multiple of b with exactly width digits, if there is one
        a = nines // b * b - b * rng.randrange(max(1, (10**width - 10 ** (width - 1)) // b // 2))
        edges += [(a, b)] if len(str(a)) == width else []
    b = rng.randrange(2, b_high)
    edges += [(10 ** (width - 1), b), (10 ** (width - 1) + 7, top), (int("10" * (width // 2) + "1" * (width % 2)), b)]
    edges += [(a, top) for a in [10 ** (width - 1)] if width > 1 and a < top]  # smaller than its divisor
    return [(a, b) for a, b in edges if len(str(a)) == width or width == 1]


def accuracy_by_length(calc, widths: list[int], n: int, seed: int = 0) -> list[length.LengthRow]:
    """As :func:`analysis.metrics.length.accuracy_by_length`, each width's problems from :func:`long_problems`."""
    rows, jobs = [], [(op, width) for op in calc.fmt.operators for width in widths]
    for op, width in track(jobs, "length", part=lambda job: f"'{job[0]}' at {job[1]} digits"):  # terminal only
        tokens = calc.fmt.at_width(width).seq_len
        count = length.problems_at(width, n, tokens)
        problems = long_problems(op, width, count, seed, calc.fmt.larger_first, b_digits(calc.fmt))
        fmt = calc.fmt.at_width(calc.width_of(problems[0]))
        seqs = calc.encode(problems, fmt)  # (n, seq_len)
        start = time.perf_counter()
        written = calc.generate(fmt.prompt_of(seqs), fmt=fmt)  # (n, answer_len)
        seconds = round(time.perf_counter() - start, 2)
        exact = fmt.exact_match(written, seqs).float().mean()
        right = (written == fmt.answer_of(seqs)).float().mean()  # every answer token, one by one
        trained = width <= calc.trained_digits
        rows.append(length.LengthRow(op, width, trained, len(problems), float(exact), float(right), seconds))
    return rows


class Length(length.Length):
    """length.py's analysis (its name, columns, figure and results), its problems from :func:`long_problems`."""

    def compute(self, ctx) -> list[length.LengthRow]:
        calc = Calculator(ctx.module.net, ctx.fmt, tokenizer_for(ctx.fmt))
        if calc.longest <= calc.trained_digits or not ctx.length_problems:
            return []
        tokens = lambda width: calc.fmt.at_width(width).seq_len  # noqa: E731
        widths = length.length_widths(calc.trained_digits, calc.longest, tokens)
        return accuracy_by_length(calc, widths, ctx.length_problems)
