"""The working of long division, written before a '/' answer (``show_work`` with ``operators='/'``): one step per
digit of a, most significant first, each the step's quotient digit then the running remainder, as wide as b:

    284/017=  0 02  1 11  6 12  016012        2 / 17 = 0 r 2; 21 -> 28 / 17 = 1 r 11; 114 / 17 = 6 r 12; then
                                              the quotient 16 and the remainder 12 (spaces added)

Step k brings down a's digit k: its quotient digit is (10 * the remainder before + that digit) // b, at most 9,
and its remainder what is left, below b -- so every token reads the step before it, one digit of a and b: the
same few digits at every length of a. The quotient's digits are the steps' digits; the remainder is the last
step's. :class:`LongDivision` is the ``working`` piece data/build.py hands a :class:`data.problems.ProblemFormat`
for it; it has :class:`data.working.Working`'s methods, with steps of its own.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from data.problems import digits_of, lookup
from data.quotient import steps_of
from data.working import result_after


class LongDivision:
    """Long division's steps before the quotient and remainder, for the ProblemFormat each method is given; a
    remainder is ``b_digits`` wide (the divisor's most digits; 0: as wide as a)."""

    def __init__(self, b_digits: int = 0):
        self.b_digits = b_digits

    @staticmethod
    def check(fmt) -> None:
        """ValueError unless the format only divides."""
        if fmt.operators != "/":
            raise ValueError(
                f"show_work=true with '/' among operators={fmt.operators!r}: the working of long division is for a "
                "format that only divides (operators='/'); or set show_work=false"
            )

    def remainder_digits(self, fmt) -> int:
        """How wide a step's remainder is written: the divisor's most digits."""
        return min(self.b_digits or fmt.digits, fmt.digits)

    def lines(self, fmt) -> int:
        """One step per digit of a."""
        return fmt.digits

    def length(self, fmt) -> int:
        return fmt.digits * (1 + self.remainder_digits(fmt))

    @staticmethod
    def line(i: int) -> tuple[str, int]:
        """Step i brings down a's digit i from the top."""
        return "step", i

    def tokens(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor, vocab: dict) -> torch.Tensor:
        """(N,) problems -> (N, length) token ids: each step's quotient digit, then its remainder's digits."""
        digit = lookup(tuple(vocab[str(d)] for d in range(10)), a.device)  # (10,): digit -> its token id
        quotients, remainders = steps_of(a, b, fmt.digits)
        written = torch.cat([quotients.unsqueeze(2), digits_of(remainders, self.remainder_digits(fmt))], dim=2)
        return digit[written].flatten(1)  # (N, digits * (1 + remainder digits))

    def text(self, fmt, a: int, op: str, b: int) -> str:
        """The steps as text, in Python's unbounded ints (a may be far wider than int64 holds)."""
        width, left, out = self.remainder_digits(fmt), 0, []
        for ch in f"{a:0{fmt.digits}d}":
            left = left * 10 + int(ch)
            out.append(f"{left // b}{left % b:0{width}d}")
            left %= b
        return "".join(out)

    def result_text(self, fmt, written: str) -> str:
        return result_after(self, fmt, written)

    def positions(self, fmt, position) -> list:
        """Each step's tokens as data/positions.py names them: step k's quotient digit and remainder digits are
        work line k, at the place of a's digit the step brings down."""
        width = self.remainder_digits(fmt)
        return [position("work", fmt.digits - 1 - k, k) for k in range(fmt.digits) for _ in range(1 + width)]


class BesideWorking:
    """Long division's steps for a format's '/' problems beside another working for its other operators (``inner``:
    long multiplication's, in experiment=mixed): each problem writes its own, the shorter padded with zeros to the
    longer, so every problem has one length."""

    def __init__(self, inner, division: LongDivision):
        self.inner, self.division = inner, division

    def check(self, fmt) -> None:
        self.inner.check(fmt)

    def lines(self, fmt) -> int:
        return self.inner.lines(fmt)

    def length(self, fmt) -> int:
        return max(self.inner.length(fmt), self.division.length(fmt))

    def line(self, i: int) -> tuple[str, int]:
        return self.inner.line(i)

    def separators(self, fmt) -> str:
        return self.inner.separators(fmt)

    def values(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.inner.values(fmt, a, op_idx, b)

    def tokens(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor, vocab: dict) -> torch.Tensor:
        """(N,) problems -> (N, length): the inner working's tokens, a division's steps where the problem divides."""
        zero = lambda t: F.pad(t, (0, self.length(fmt) - t.shape[1]), value=vocab["0"])  # noqa: E731
        steps = self.division.tokens(fmt, a, op_idx, b, vocab)
        return torch.where(
            fmt.divisions(op_idx).unsqueeze(1), zero(steps), zero(self.inner.tokens(fmt, a, op_idx, b, vocab))
        )

    def text(self, fmt, a: int, op: str, b: int) -> str:
        written = self.division.text(fmt, a, op, b) if op == "/" else self.inner.text(fmt, a, op, b)
        return written.ljust(self.length(fmt), "0")

    def result_text(self, fmt, written: str) -> str:
        return result_after(self, fmt, written)
