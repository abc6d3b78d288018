"""A short second operand: problems whose b has at most ``b_digits`` digits while a has the format's width (N x 1,
N x 2 multiplication: a long number times a short one). A research setting (``data.b_digits``, 0: off), handed to a
:class:`data.problems.ProblemFormat` as its ``draws`` piece by data/build.py, around any other operand draws: the
layout stays the lesson's (b written at the format's width, its high places zeros), only the draws change, for the
training batches and the held-out sets alike."""

from __future__ import annotations

import torch

from data.checks import check_whole


def b_digits(fmt) -> int:
    """The most digits ``fmt``'s b is drawn with, 0 where as many as a's (no short operand)."""
    return fmt.draws.b_digits if isinstance(fmt.draws, ShortOperand) else 0


class ShortOperand:
    """Operand draws whose b is below 10**b_digits; ``inner``: the other draws (data/operands.py), or None."""

    def __init__(self, b_digits: int, inner=None):
        self.b_digits, self.inner = b_digits, inner

    @staticmethod
    def check(b_digits: int) -> None:
        """ValueError unless ``b_digits`` is a whole number >= 0 (0: b as long as a)."""
        check_whole("b_digits", b_digits, least=0, hint=" (0: b as long as a)")

    def bound(self, fmt) -> int:
        """Every b these draws write is below this: 10**b_digits, at most the format's own 10**digits."""
        return 10 ** min(self.b_digits, fmt.digits)

    def varied(self, fmt, a: torch.Tensor, b: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """(n,) operands -> as the inner draws vary them, b cut to its last b_digits digits (still uniform: 10**k
        divides 10**digits)."""
        if self.inner is not None:
            a, b = self.inner.varied(fmt, a, b, generator)
        return a, b % self.bound(fmt)

    def ordered(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (a, op_idx, b) if self.inner is None else self.inner.ordered(fmt, a, op_idx, b)

    def only_written(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The problems of (a, op_idx, b) these draws write: b short enough, and what the inner draws write."""
        keep = b < self.bound(fmt)
        a, op_idx, b = a[keep], op_idx[keep], b[keep]
        return (a, op_idx, b) if self.inner is None else self.inner.only_written(fmt, a, op_idx, b)
