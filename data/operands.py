"""How operands are drawn: uniform below 10**digits (:meth:`OperandDraws.random_problems`), or every problem listed
(:meth:`OperandDraws.all_problems`), and three research options of :class:`data.problems.ProblemFormat`, all off
by default (the format holds its :class:`OperandDraws` as ``fmt.draws``):

- ``mixed_lengths``: the share of problems whose operands are of mixed lengths: each operand's digit count
  uniform in 1..digits, then its digits uniform (zero-padded to ``digits`` as always); the rest uniform over all
  values, where 9 in 10 have ``digits`` digits. true = 1.0, false = 0.0.
- ``round_numbers``: the share of operands drawn as round numbers: a run of random digits of uniform length
  1..digits, then a uniform number of zeros that keeps it within ``digits`` (5000000000, 120000, 7): carries out
  of a column with nothing but zeros below it, which uniform operands almost never have.
- ``larger_first``: '-' problems written with the larger operand first (a >= b), so no result is negative: a
  result's sign needs the whole of both numbers compared, while its digits and borrows need only neighbouring
  places.

Problems are drawn and encoded in bulk as int64 tensors, which bounds the operands' width (``MAX_DIGITS``).
"""

from __future__ import annotations

import torch

# The widest operands int64 arithmetic can hold: a*b must stay below 2**63 for '*', a+b for '+'/'-'.
MAX_DIGITS = {"+": 17, "-": 17, "*": 9}


class OperandDraws:
    """Operand draws for one ProblemFormat (``fmt``: its digits, operators and the options above)."""

    def __init__(self, fmt):
        self.fmt = fmt

    def random_problems(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """n problems: (a, op_idx, b), each (n,) int64 on the generator's device; op_idx indexes ``operators``.
        Operands are uniform below 10**digits, then varied as the options above say."""
        high, device = 10**self.fmt.digits, generator.device
        a = torch.randint(high, (n,), generator=generator, device=device)
        b = torch.randint(high, (n,), generator=generator, device=device)
        a, b = self.varied(a, b, generator)  # mixed lengths, round numbers
        op_idx = torch.randint(len(self.fmt.operators), (n,), generator=generator, device=device)
        return self.ordered(a, op_idx, b)  # larger first

    @property
    def n_problems(self) -> int:
        return len(self.fmt.operators) * 10 ** (2 * self.fmt.digits)

    def all_problems(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, ...]:
        """Every problem of this format (only sensible for small digit counts)."""
        high = 10**self.fmt.digits
        grid = torch.arange(self.n_problems, dtype=torch.int64, device=device)
        return self.only_written((grid // high) % high, grid // (high * high), grid % high)

    def check(self) -> None:
        """ValueError unless mixed_lengths and round_numbers are shares; true/false become 1.0/0.0."""
        for name in ("mixed_lengths", "round_numbers"):
            share = getattr(self.fmt, name)
            if not isinstance(share, (bool, int, float)) or not 0 <= share <= 1:
                raise ValueError(f"{name}={share!r}: must be true, false or a share in [0, 1]")
            object.__setattr__(self.fmt, name, float(share))  # true -> 1.0: one format, one hash

    def check_vectorised(self) -> None:
        """ValueError unless int64 holds every value of this format: what drawing and encoding in bulk need
        (longer problems are written as text, one by one: :meth:`written_text`)."""
        limit = min(MAX_DIGITS[op] for op in self.fmt.operators)
        if self.fmt.digits > limit:
            raise ValueError(f"digits={self.fmt.digits}: at most {limit} with operators {self.fmt.operators!r}")

    def varied(self, a: torch.Tensor, b: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """(n,) uniform operands a, b -> the operands this format draws: some of mixed lengths, some round (as
        ``mixed_lengths`` and ``round_numbers`` say; unchanged when both are 0)."""
        if self.fmt.mixed_lengths:
            (short_a, _), (short_b, _) = self._of_random_length(a, generator), self._of_random_length(b, generator)
            if self.fmt.mixed_lengths < 1:  # (n,) which problems get them (at 1, all: no draw)
                mixed = torch.rand(len(a), generator=generator, device=a.device) < self.fmt.mixed_lengths
                short_a, short_b = torch.where(mixed, short_a, a), torch.where(mixed, short_b, b)
            a, b = short_a, short_b
        if self.fmt.round_numbers:
            a, b = self._rounded(a, generator), self._rounded(b, generator)
        return a, b

    def _of_random_length(self, x: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) uniform values below 10**digits -> (values of a uniform length 1..digits each, uniform within it;
        those (n,) lengths)."""
        length = torch.randint(1, self.fmt.digits + 1, x.shape, generator=generator, device=x.device)
        low = torch.where(length == 1, 0, 10 ** (length - 1))  # (n,) the smallest value of that length
        return low + x % (10**length - low), length  # the remainder's bias is below 10**(length - digits)

    def _rounded(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """(n,) values -> the share ``round_numbers`` of them replaced by round numbers."""
        run, length = self._of_random_length(x, generator)  # (n,) a run of digits, (n,) its length
        zeros = (torch.rand(x.shape, generator=generator, device=x.device) * (self.fmt.digits - length + 1)).long()
        picked = torch.rand(x.shape, generator=generator, device=x.device) < self.fmt.round_numbers
        return torch.where(picked, run * 10**zeros, x)

    def ordered(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(a, op_idx, b) as this format writes them: with ``larger_first``, a '-' problem's operands swapped where
        a < b."""
        if not self.fmt.larger_first:
            return a, op_idx, b
        swap = self.smaller_first(a, op_idx, b)
        return torch.where(swap, b, a), op_idx, torch.where(swap, a, b)

    def smaller_first(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(n,) bool: the '-' problems whose smaller operand comes first, which ``larger_first`` never writes."""
        return (self.fmt.operator_codes(op_idx) == 1) & (a < b)  # code 1: '-'

    def only_written(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The problems of (a, op_idx, b) this format writes: with ``larger_first``, none whose smaller comes first."""
        if not self.fmt.larger_first:
            return a, op_idx, b
        keep = ~self.smaller_first(a, op_idx, b)
        return a[keep], op_idx[keep], b[keep]
