"""Fresh training batches, streamed: a new batch of problems every step, drawn on the device that trains.

Batch ``i`` is a pure function of (seed, i, draw_steps): the stream can restart at any step (resuming needs only
the step, whatever the loader prefetched), and with ``world_size`` processes every step draws one global batch
of ``batch_size * world_size`` problems of which process ``rank`` takes its slice -- so data-parallel training
sees exactly the problems a single process with the global batch would.

The batches are drawn on ``device``, ``draw_steps`` steps' worth at a time: on a GPU one draw of many batches
costs the kernel launches (and the one host sync of picking training problems) of a single batch, so a step
only slices what is already there. ``draw_steps=1`` draws each batch on its own.

Two research options mix into the stream: hard cases in early batches (``hard``: :class:`data.difficulty.HardCases`)
and ``mixed_widths``: each draw written at a width drawn uniformly from 1..digits (its operands at most that
long), so sequences of every length are trained on; its problems' splits are the same hash as at full width.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator

import torch
from torch.utils.data import IterableDataset

from data.checks import check_whole
from data.difficulty import HardCases
from data.problems import ProblemEncoder, ProblemFormat, mix
from data.sampler import ProblemSampler

ACCELERATOR_DRAW_STEPS = 64  # on a GPU, training batches are drawn this many steps at a time


def derived_seed(*parts: object) -> int:
    """A seed hashed from ``parts`` (e.g. "step", seed, step): every one of them counts, neighbouring values give
    unrelated seeds, and computing it reads nothing back from a device (plain Python)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # torch takes seeds below 2**63


@functools.cache
def width_of(fmt: ProblemFormat, seq_len: int) -> ProblemFormat:
    """``fmt`` at the width whose sequences are ``seq_len`` tokens long (ValueError if none is): the layout of a
    batch of another width (``mixed_widths``), known from its length."""
    for digits in range(1, seq_len):
        if fmt.at_width(digits).seq_len == seq_len:
            return fmt.at_width(digits)
    raise ValueError(f"no width of {fmt.operators!r} problems makes sequences of {seq_len} tokens")


class FreshBatches(IterableDataset):
    """An endless stream of freshly drawn training batches, (batch_size, seq_len) token ids each."""

    def __init__(
        self,
        sampler: ProblemSampler,
        encoder: ProblemEncoder,
        batch_size: int,
        seed: int,
        start: int = 0,
        rank: int = 0,
        world_size: int = 1,
        hard: HardCases | None = None,
        device: torch.device | str = "cpu",
        draw_steps: int = 1,
        mixed_widths: bool = False,
    ):
        self.sampler, self.encoder, self.batch_size, self.seed = sampler, encoder, batch_size, seed
        self.start, self.rank, self.world_size, self.hard = start, rank, world_size, hard
        self.device, self.draw_steps, self.mixed_widths = torch.device(device), draw_steps, mixed_widths
        self.widths: dict[int, tuple[ProblemSampler, ProblemEncoder]] = {}

    @staticmethod
    def check(draw_steps: int | None, mixed_widths: bool, streaming: bool, show_work: bool) -> None:
        """ValueError unless the datamodule's draw_steps and mixed_widths can be streamed."""
        if mixed_widths and (show_work or not streaming):
            raise ValueError(
                "mixed_widths=true: needs streaming=true and show_work=false (batches of every width are drawn "
                "as they are trained on, and working has one layout per width)"
            )
        if draw_steps is not None:
            check_whole("draw_steps", draw_steps, hint=", or null (chosen for the device)")

    def at_width(self, digits: int) -> tuple[ProblemSampler, ProblemEncoder]:
        """The sampler and encoder of problems written ``digits`` wide."""
        if digits == self.sampler.fmt.digits:
            return self.sampler, self.encoder
        if digits not in self.widths:
            fmt = self.sampler.fmt.at_width(digits)
            sampler = ProblemSampler(fmt, self.sampler.fractions["val"], self.sampler.fractions["test"])
            self.widths[digits] = sampler, ProblemEncoder(fmt, self.encoder.vocab)
        return self.widths[digits]

    def draw(self, index: int) -> torch.Tensor:
        """(draw_steps, batch_size, seq_len): this process's batches of steps index * draw_steps onwards."""
        # hash (seed, index) first: generators seeded with neighbouring numbers start out alike
        key = mix(torch.tensor([self.seed * 1_000_003 + index]))
        generator = torch.Generator(self.device).manual_seed(int(key) & (2**63 - 1))
        n, steps = self.batch_size * self.world_size, range(index * self.draw_steps, (index + 1) * self.draw_steps)
        sampler, encoder = self.sampler, self.encoder
        if self.mixed_widths:
            top = self.sampler.fmt.digits
            width = torch.randint(1, top + 1, (1,), generator=generator, device=self.device)
            sampler, encoder = self.at_width(int(width))  # one host sync per draw on a GPU
        n_hard = [self.hard.count(n, step) if self.hard else 0 for step in steps]  # per step, known on the host
        problems = sampler.sample("train", n * len(steps) - sum(n_hard), generator)
        if sum(n_hard):  # each step's hard cases shuffled into its uniform ones, so every slice gets its share
            hard = self.hard.sample(sum(n_hard), generator, sampler)
            orders = [torch.randperm(n, generator=generator, device=self.device) for _ in steps]

            def shuffled_in(uniform: torch.Tensor, hard: torch.Tensor) -> torch.Tensor:  # one column: a, op or b
                pieces = zip(uniform.split([n - k for k in n_hard]), hard.split(n_hard), orders, strict=True)
                return torch.cat([torch.cat([u, h])[order] for u, h, order in pieces])

            problems = tuple(map(shuffled_in, problems, hard))
        batches = encoder.encode(*problems).view(len(steps), n, -1)  # (draw_steps, global batch, seq_len)
        return batches[:, self.rank * self.batch_size : (self.rank + 1) * self.batch_size]

    def __iter__(self):
        index, skip = divmod(self.start, self.draw_steps)
        while True:
            yield from self.draw(index)[skip:]
            index, skip = index + 1, 0


class ShuffledEpochs(IterableDataset):
    """A fixed training set's batches, an epoch a pass: each epoch its own shuffle of the set, a pure function of
    (seed, epoch) -- as a streamed batch is of (seed, step) -- with its last, partial batch dropped. Each pass
    starts where ``steps_done()`` (the steps trained so far) says: the next epoch or, in a resumed run, the batch
    of its epoch where it stopped, so it trains on exactly the problems the run would have. With several processes
    each is given its share of the set: the loader adds no sampler."""

    def __init__(self, problems: torch.Tensor, batch_size: int, seed: int, steps_done: Callable[[], int]):
        self.problems, self.batch_size, self.seed, self.steps_done = problems, batch_size, seed, steps_done
        self.batches = len(problems) // batch_size  # per epoch

    def order(self, epoch: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(derived_seed("epoch", self.seed, epoch))
        return torch.randperm(len(self.problems), generator=generator)

    def __iter__(self) -> Iterator[torch.Tensor]:
        epoch, first = divmod(self.steps_done(), self.batches)
        order = self.order(epoch).split(self.batch_size)
        return (self.problems[order[batch]] for batch in range(first, self.batches))
