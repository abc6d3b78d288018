"""What an operation beyond the lesson's ``+ - *`` is: its symbol, its name, its arithmetic on tensors and on Python
ints, how wide its result is written and how hard one problem of it is. data/operations.py registers each one;
everything else reads them from there (the format, its tokens, the text, the parser, hard-case sampling):

    Operation("%", "remainder", answer_digits=lambda digits: digits, nonzero_b=True,
              values=lambda a, b, digits: a % b.clamp(min=1), evaluate=lambda a, b: a % b)

An operation's result is one number, never below 0, written as the lesson writes a result (zero-padded, in the
format's digit order, signed '+' where '-' is among the operators); a pair such as division's quotient and remainder
is written as one number (``values``' int64; a result that is not an int says how with its ``written(digits)``),
read back as ``evaluate``'s type by ``read`` (data/quotient.py's :class:`Quotient`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch


def columns_of(longer: torch.Tensor, columns: int | None) -> int:
    """``columns``, or (None) the digits of the largest value in ``longer`` (0 for no values): how many digit
    columns a rule of data/difficulty.py walks."""
    if columns is not None:
        return columns
    return len(str(int(longer.max()))) if len(longer) else 0


def no_steps(a: torch.Tensor, b: torch.Tensor, columns: int | None = None) -> torch.Tensor:
    """Every problem as hard as every other: an operation with no rule of its own."""
    return torch.zeros_like(a)


@dataclasses.dataclass(frozen=True)
class Operation:
    """One operation ``a <symbol> b``, both operands whole numbers of at most ``digits`` digits."""

    symbol: str  # one character, none of the lesson's: the token a model that does it has after the lesson's
    name: str  # as summaries and model cards say it: "division"
    answer_digits: Callable[[int], int]  # operands' digits -> the result's digits, as written
    values: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]  # (N,) a, b, digits -> (N,) results as written
    evaluate: Callable[[int, int], object]  # a, b -> the result in Python's unbounded ints (calc.py, verify.py)
    nonzero_b: bool = False  # b is never 0 (drawn from 1 up; the parser refuses it)
    max_digits: int = 9  # the widest operands whose written result int64 holds
    steps: Callable = no_steps  # (N,) a, b, columns -> (N,) how hard each problem is (data/difficulty.py)
    hard_steps: Callable | None = None  # what hard-case sampling draws by (None: ``steps``)
    long_steps: Callable[[int, int], int] | None = None  # ``steps`` of one problem of any length (None: none)
    read: Callable[[int, int], object] = lambda number, digits: number  # the int written -> ``evaluate``'s result
    answer: str = "a whole number"  # what a written result is, as an unreadable one is told: "not a whole number"

    def __post_init__(self) -> None:
        if len(self.symbol) != 1 or self.symbol in "+-*=0123456789 r" or not self.symbol.isprintable():
            raise ValueError(f"operation {self.name!r}: symbol {self.symbol!r} must be one new printable character")
