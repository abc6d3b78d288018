"""How operands are varied: three research options of :class:`data.problems.ProblemFormat`, all off by default,
whose :class:`OperandDraws` piece the format is handed as ``fmt.draws`` (data/build.py; None when all three are
off) and calls as it draws uniform operands below 10**digits (``random_problems``, ``all_problems``):

- ``mixed_lengths``: the share of problems whose operands are of mixed lengths: each operand's digit count
  uniform in 1..digits, then its digits uniform (zero-padded to ``digits`` as always); the rest uniform over all
  values, where 9 in 10 have ``digits`` digits. true = 1.0, false = 0.0.
- ``round_numbers``: the share of operands drawn as round numbers: a run of random digits of uniform length
  1..digits, then a uniform number of zeros that keeps it within ``digits`` (5000000000, 120000, 7): carries out
  of a column with nothing but zeros below it, which uniform operands almost never have.
- ``larger_first``: '-' problems written with the larger operand first (a >= b), so no result is negative: a
  result's sign needs the whole of both numbers compared, while its digits and borrows need only neighbouring
  places.

The piece holds nothing of its own: each method reads the format it is given.
"""

from __future__ import annotations

import torch


class OperandDraws:
    """Operand draws for the ProblemFormat each method is given (``fmt``: its digits, operators and the options
    above)."""

    @staticmethod
    def shares(settings: dict) -> None:
        """ValueError unless settings' mixed_lengths and round_numbers are shares; true/false become 1.0/0.0."""
        for name in ("mixed_lengths", "round_numbers"):
            share = settings.get(name, 0.0)
            if not isinstance(share, (bool, int, float)) or not 0 <= share <= 1:
                raise ValueError(f"{name}={share!r}: must be true, false or a share in [0, 1]")
            settings[name] = float(share)  # true -> 1.0: one format, one hash

    def varied(self, fmt, a: torch.Tensor, b: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """(n,) uniform operands a, b -> the operands this format draws: some of mixed lengths, some round (as
        ``mixed_lengths`` and ``round_numbers`` say; unchanged when both are 0)."""
        if fmt.mixed_lengths:
            (short_a, _), (short_b, _) = (
                self._of_random_length(fmt, a, generator),
                self._of_random_length(fmt, b, generator),
            )
            if fmt.mixed_lengths < 1:  # (n,) which problems get them (at 1, all: no draw)
                mixed = torch.rand(len(a), generator=generator, device=a.device) < fmt.mixed_lengths
                short_a, short_b = torch.where(mixed, short_a, a), torch.where(mixed, short_b, b)
            a, b = short_a, short_b
        if fmt.round_numbers:
            a, b = self._rounded(fmt, a, generator), self._rounded(fmt, b, generator)
        return a, b

    def _of_random_length(self, fmt, x: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) uniform values below 10**digits -> (values of a uniform length 1..digits each, uniform within it;
        those (n,) lengths)."""
        length = torch.randint(1, fmt.digits + 1, x.shape, generator=generator, device=x.device)
        low = torch.where(length == 1, 0, 10 ** (length - 1))  # (n,) the smallest value of that length
        return low + x % (10**length - low), length  # the remainder's bias is below 10**(length - digits)

    def _rounded(self, fmt, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """(n,) values -> the share ``round_numbers`` of them replaced by round numbers."""
        run, length = self._of_random_length(fmt, x, generator)  # (n,) a run of digits, (n,) its length
        zeros = (torch.rand(x.shape, generator=generator, device=x.device) * (fmt.digits - length + 1)).long()
        picked = torch.rand(x.shape, generator=generator, device=x.device) < fmt.round_numbers
        return torch.where(picked, run * 10**zeros, x)

    def ordered(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(a, op_idx, b) as this format writes them: with ``larger_first``, a '-' problem's operands swapped where
        a < b."""
        if not fmt.larger_first:
            return a, op_idx, b
        swap = self.smaller_first(fmt, a, op_idx, b)
        return torch.where(swap, b, a), op_idx, torch.where(swap, a, b)

    def smaller_first(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(n,) bool: the '-' problems whose smaller operand comes first, which ``larger_first`` never writes."""
        return (fmt.operator_codes(op_idx) == 1) & (a < b)  # code 1: '-'

    def only_written(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The problems of (a, op_idx, b) this format writes: with ``larger_first``, none whose smaller comes first."""
        if not fmt.larger_first:
            return a, op_idx, b
        keep = ~self.smaller_first(fmt, a, op_idx, b)
        return a[keep], op_idx[keep], b[keep]
