"""The working of a long number times a long one as a running product (``show_work`` with ``running_product``):
b's digits taken from the top, each line ten times the line before plus a times the next digit of b, so that line i
is a times b's top i + 1 digits and the last line is the product:

    123*456=  294000+  535500+  880650      a*4 = 492, a*45 = 5535, then a*456 = 56088, each written
                                            units first, 6 digits wide (spaces added)

Every digit of a line is then the digit one place below it on the line before, one digit of a times b's digit for
this line, and a carry of at most 9 that the digit written before it tells apart: the same few digits at every
width and on every line, however many lines b's length makes (Horner's rule; a model with the line window of
``model.place_of=lined`` reads the line before and its own digit of b by their line, model/positions.py).

:class:`RunningProduct` is the ``working`` piece data/build.py hands a :class:`data.problems.ProblemFormat` when
``show_work`` and ``running_product`` are both set; it has :class:`data.working.Working`'s methods, with lines of
its own. ``line_end_sees_next`` (data.line_end_sees_next) puts the token that ends a line -- the line's last digit,
which predicts its '+' or the [EOS] -- on the next line (data/positions.py: line_ids): with ``model.place_of=lined``
it then reads b's next digit, so it knows whether another line follows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from data.working import result_after, work_length, work_text, work_tokens


@dataclass(frozen=True)
class RunningProduct:
    """The lines a * (b's top i + 1 digits), i = 0 .. digits - 2, before the product, for the ProblemFormat each
    method is given."""

    line_end_sees_next: bool = False  # a line's last digit sits on the next line (the module's docstring)

    @staticmethod
    def check(fmt) -> None:
        """ValueError unless the format multiplies, and only multiplies."""
        if fmt.operators != "*":
            raise ValueError(
                f"running_product=true with operators={fmt.operators!r}: the running product is the working of "
                "multiplication; set operators='*'"
            )

    @staticmethod
    def lines(fmt) -> int:
        return fmt.digits - 1

    @staticmethod
    def line(i: int) -> tuple[str, int]:
        """Line i is ("running", i): a times b's top i + 1 digits."""
        return "running", i

    def length(self, fmt) -> int:
        return work_length(self, fmt)

    def separators(self, fmt) -> str:
        return "+" * self.lines(fmt)

    def values(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(N,) problems -> (N, lines) values a * (b // 10**(digits - 1 - i)), i = 0 .. lines - 1."""
        if not self.lines(fmt):
            return torch.zeros(len(a), 0, dtype=torch.int64, device=a.device)
        return torch.stack([a * (b // 10 ** (fmt.digits - 1 - i)) for i in range(self.lines(fmt))], dim=1)

    def tokens(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor, vocab: dict) -> torch.Tensor:
        return work_tokens(self, fmt, a, op_idx, b, vocab)

    def result_text(self, fmt, written: str) -> str:
        return result_after(self, fmt, written)

    def text(self, fmt, a: int, op: str, b: int) -> str:
        """The lines as text, in Python's unbounded ints (operands may be far wider than int64 holds)."""
        return work_text(self, fmt, [a * (b // 10 ** (fmt.digits - 1 - i)) for i in range(self.lines(fmt))])


def lines_end_on_next(fmt) -> bool:
    """Whether ``fmt``'s working is a running product whose lines' last digits sit on the next line."""
    return isinstance(fmt.working, RunningProduct) and fmt.working.line_end_sees_next
