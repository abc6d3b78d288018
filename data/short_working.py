"""The working of a long number times a short one (``show_work`` with ``b_digits`` = k >= 2): before the product,
one line per digit of b above its units, a times that digit, each as wide as the answer and in its digit order:

    123456*000078=  291468000000+  865926900000     a*7 = 864192, then the product a*78 = 9629568, each
                                                    written units first, 12 digits wide (spaces added)

The product is then a*b_0 + 10*(a*b_1) + ... : at every column, one digit of a times b's units, the digits of the
lines just below it and a carry of at most 9 (for k = 2), which the digit written before it tells apart -- the
same few digits at every width, so what is learned on 9-digit problems is what a 1,000-digit one needs. Without
the line, a column's carry reaches 17 and is not told by the digit below (docs/arithmetic.md).

:class:`ShortWorking` is the ``working`` piece data/build.py hands a :class:`data.problems.ProblemFormat` when
``show_work`` and ``b_digits`` are both set; it has :class:`data.working.Working`'s methods, with lines of its own.
"""

from __future__ import annotations

import torch

from data.working import result_after, work_length, work_text, work_tokens


def b_limit(fmt) -> int:
    """The most digits b may have in ``fmt``'s layout: the working's b_digits, 0 where any b fits."""
    return fmt.working.b_digits if isinstance(fmt.working, ShortWorking) else 0


class ShortWorking:
    """The lines a * b_j, j = 1 .. b_digits - 1, before the product, for the ProblemFormat each method is given:
    the piece :class:`data.working.Working` is, with lines of its own (tokens and lengths written as its are)."""

    def __init__(self, b_digits: int):
        self.b_digits = b_digits

    def check(self, fmt) -> None:
        """ValueError unless the format multiplies, only, by a b of at least 2 digits."""
        if fmt.operators != "*" or self.b_digits < 2:
            raise ValueError(
                f"show_work=true with b_digits={self.b_digits} and operators={fmt.operators!r}: the working of a "
                "long number times a short one needs operators='*' and b_digits >= 2 (N x 1 has no working)"
            )

    def lines(self, fmt) -> int:
        return self.b_digits - 1

    def length(self, fmt) -> int:
        return work_length(self, fmt)

    def tokens(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor, vocab: dict) -> torch.Tensor:
        return work_tokens(self, fmt, a, op_idx, b, vocab)

    def result_text(self, fmt, written: str) -> str:
        return result_after(self, fmt, written)

    @staticmethod
    def line(i: int) -> tuple[str, int]:
        """Line i is ("multiple", i + 1): a * b_{i+1}, not moved up a place as long multiplication's partial
        products are (``Working.line``'s "product")."""
        return "multiple", i + 1

    def separators(self, fmt) -> str:
        return "+" * self.lines(fmt)

    def values(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(N,) problems -> (N, lines) values a * b_j, j = 1 .. b_digits - 1 (every problem multiplies)."""
        return torch.stack([a * ((b // 10**j) % 10) for j in range(1, self.b_digits)], dim=1)

    def text(self, fmt, a: int, op: str, b: int) -> str:
        """The lines as text, in Python's unbounded ints (a may be far wider than int64 holds)."""
        return work_text(self, fmt, [a * (b // 10**j % 10) for j in range(1, self.b_digits)])
