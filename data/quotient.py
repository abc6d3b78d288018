"""Division with remainder as an operation (data/operation.py): ``a/b`` (b > 0) is its quotient and remainder,
:class:`Quotient`, shown ``3 r 2`` (17/5) and written as one number, the quotient then the remainder each ``digits``
wide (data/division.py's format lays it out). How hard a division is: the steps of its long division
(:func:`steps_of`, which data/long_division.py writes out), and for hard-case sampling the tight ones.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from data.operation import Operation, columns_of


class Quotient(NamedTuple):
    """A division's result: its quotient and remainder, written ``3 r 2`` (17/5) wherever a result is shown."""

    quotient: int
    remainder: int

    def __str__(self) -> str:
        return f"{self.quotient} r {self.remainder}"

    def written(self, digits: int) -> int:
        """The pair as one number: the quotient, then the remainder ``digits`` wide."""
        return self.quotient * 10**digits + self.remainder


def steps_of(a: torch.Tensor, b: torch.Tensor, digits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) divisions -> ((N, digits) quotient digits, (N, digits) remainders after each step) of their long
    division, top step first: step k brings down a's digit k and divides the running remainder by b."""
    divisor, left = b.clamp(min=1), torch.zeros_like(a)
    quotients, remainders = [], []
    for k in range(digits - 1, -1, -1):
        left = left * 10 + (a // 10**k) % 10
        quotients.append(left // divisor)
        left = left % divisor
        remainders.append(left)
    return torch.stack(quotients, dim=1), torch.stack(remainders, dim=1)


def division_steps(a: torch.Tensor, b: torch.Tensor, columns: int | None = None) -> torch.Tensor:
    """How many steps of the long division a / b write a quotient digit other than 0: a's digits brought down
    one by one, most significant first, each step dividing the running remainder (b > 0; b = 0 counts none)."""
    quotients, _ = steps_of(a, b, max(columns_of(a, columns), 1))  # (N, steps) each
    return torch.where(b > 0, (quotients > 0).sum(dim=1), 0)


def tight_division_steps(a: torch.Tensor, b: torch.Tensor, columns: int | None = None) -> torch.Tensor:
    """How many steps of the long division a / b have a partial dividend within two of a multiple of b above it,
    or within one past a multiple it reached (remainder b - 2, b - 1; or 0, 1 with a quotient digit > 0; b > 2): where
    a partial dividend misjudged by a little writes its quotient digit one off, div3's commonest mistake
    (docs/arithmetic.md). Hard-case sampling draws divisions by it."""
    quotients, remainders = steps_of(a, b, max(columns_of(a, columns), 1))  # (N, steps) each
    divisor = b.unsqueeze(1)
    tight = (remainders >= divisor - 2) | ((remainders <= 1) & (quotients > 0))
    return ((divisor > 2) & tight).sum(dim=1)


def long_division_steps(a: int, b: int) -> int:
    """:func:`division_steps` of one division of any length, in Python's ints, as it walks a's digits."""
    left = count = 0
    for digit in str(a):
        left = left * 10 + int(digit)
        count, left = count + (left >= b), left % b
    return count


DIVISION = Operation(
    "/",
    "division",
    answer_digits=lambda digits: 2 * digits,  # the quotient and the remainder side by side
    values=lambda a, b, digits: a // b.clamp(min=1) * 10**digits + a % b.clamp(min=1),
    evaluate=lambda a, b: Quotient(*divmod(a, b)),
    nonzero_b=True,
    max_digits=9,  # q * 10**digits + r in int64
    steps=division_steps,
    hard_steps=tight_division_steps,
    long_steps=long_division_steps,
    read=lambda number, digits: Quotient(*divmod(number, 10**digits)),  # q * 10**digits + r
    answer="a quotient and remainder",
)
