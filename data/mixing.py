"""What research mixes into the stream of training batches (data/stream.py), handed to it as its ``mix`` piece by
data/build.py -- the lesson's stream draws uniform problems of the trained width without it:

- hard cases in early batches (``hard``: :class:`data.difficulty.HardCases`), a share that fades;
- ``mixed_widths``: each draw written at a width drawn uniformly from 1..digits (its operands at most that long),
  so sequences of every length are trained on; its problems' splits are the same hash as at full width.
"""

from __future__ import annotations

import functools

import torch

from data.difficulty import HardCases
from data.problems import ProblemEncoder, ProblemFormat
from data.sampler import ProblemSampler
from data.working import layout_of


def width_of(fmt: ProblemFormat, seq_len: int) -> ProblemFormat:
    """``fmt`` at the width whose sequences are ``seq_len`` tokens long (ValueError if none is): the layout of a
    ``mixed_widths`` training batch, known from its length -- what training/assemble.py hands the module as its
    ``widths``."""
    return _width_of(fmt, layout_of(fmt), seq_len)


@functools.cache  # per layout (data/working.py: layout_of), not per format alone
def _width_of(fmt: ProblemFormat, _layout: tuple, seq_len: int) -> ProblemFormat:
    for digits in range(1, seq_len):
        if fmt.at_width(digits).seq_len == seq_len:
            return fmt.at_width(digits)
    raise ValueError(f"no width of {fmt.operators!r} problems makes sequences of {seq_len} tokens")


class MixedDraws:
    """A stream's draws with hard cases (``hard``, or None) and, with ``mixed_widths``, at a width of 1..digits."""

    def __init__(self, hard: HardCases | None, mixed_widths: bool):
        self.hard, self.mixed_widths = hard, mixed_widths
        self.widths: dict[int, tuple[ProblemSampler, ProblemEncoder]] = {}

    @staticmethod
    def check(mixed_widths: bool, streaming: bool, long_working: bool) -> None:
        """ValueError unless the datamodule's mixed_widths can be streamed (``long_working``: show_work's long
        multiplication, whose layout is learned one width at a time)."""
        if not isinstance(mixed_widths, bool):
            raise ValueError(f"mixed_widths={mixed_widths!r}: must be true or false")
        if mixed_widths and (long_working or not streaming):
            raise ValueError(
                "mixed_widths=true: needs streaming=true, and show_work=false unless b_digits or running_product "
                "is set (batches of every width are drawn as they are trained on, and long multiplication's "
                "working has one layout per width)"
            )

    def at_width(self, stream, digits: int) -> tuple[ProblemSampler, ProblemEncoder]:
        """The sampler and encoder of ``stream``'s problems written ``digits`` wide: of the stream's own kinds
        (a op b's, or a sum's: data/sums.py)."""
        if digits == stream.sampler.fmt.digits:
            return stream.sampler, stream.encoder
        if digits not in self.widths:
            fmt, fractions = stream.sampler.fmt.at_width(digits), stream.sampler.fractions
            sampler = type(stream.sampler)(fmt, fractions["val"], fractions["test"])
            self.widths[digits] = sampler, type(stream.encoder)(fmt, stream.encoder.vocab)
        return self.widths[digits]

    def draw(self, stream, n: int, steps: range, generator: torch.Generator) -> torch.Tensor:
        """(len(steps) * n, seq_len) token ids: ``stream``'s batches of ``steps``, n problems each."""
        sampler, encoder = stream.sampler, stream.encoder
        if self.mixed_widths:
            top = stream.sampler.fmt.digits
            width = torch.randint(1, top + 1, (1,), generator=generator, device=stream.device)
            sampler, encoder = self.at_width(stream, int(width))  # one host sync per draw on a GPU
        n_hard = [self.hard.count(n, step) if self.hard else 0 for step in steps]  # per step, known on the host
        problems = sampler.sample("train", n * len(steps) - sum(n_hard), generator)
        if sum(n_hard):  # each step's hard cases shuffled into its uniform ones, so every slice gets its share
            hard = self.hard.sample(sum(n_hard), generator, sampler)
            orders = [torch.randperm(n, generator=generator, device=stream.device) for _ in steps]

            def shuffled_in(uniform: torch.Tensor, hard: torch.Tensor) -> torch.Tensor:  # one column: a, op or b
                pieces = zip(uniform.split([n - k for k in n_hard]), hard.split(n_hard), orders, strict=True)
                return torch.cat([torch.cat([u, h])[order] for u, h, order in pieces])

            problems = tuple(map(shuffled_in, problems, hard))
        return encoder.encode(*problems)
