"""Fresh training batches, streamed: a new batch of problems every step, drawn on the device that trains.

Batch ``i`` is a pure function of (seed, i, draw_steps): the stream can restart at any step (resuming needs only
the step, whatever the loader prefetched), and with ``world_size`` processes every step draws one global batch
of ``batch_size * world_size`` problems of which process ``rank`` takes its slice -- so data-parallel training
sees exactly the problems a single process with the global batch would.

The batches are drawn on ``device``, ``draw_steps`` steps' worth at a time: on a GPU one draw of many batches
costs the kernel launches (and the one host sync of picking training problems) of a single batch, so a step
only slices what is already there. ``draw_steps=1`` draws each batch on its own.

Research draws other problems into the stream through one piece it is handed, ``mix`` (data/mixing.py, built by
data/build.py): hard cases in early batches, batches of mixed widths. None: uniform problems, as the lesson trains.
"""

from __future__ import annotations

import torch
from torch.utils.data import IterableDataset

from data.problems import ProblemEncoder, mix
from data.sampler import ProblemSampler

ACCELERATOR_DRAW_STEPS = 64  # on a GPU, training batches are drawn this many steps at a time


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
        device: torch.device | str = "cpu",
        draw_steps: int = 1,
        mix=None,
    ):
        self.sampler, self.encoder, self.batch_size, self.seed = sampler, encoder, batch_size, seed
        self.start, self.rank, self.world_size = start, rank, world_size
        self.device, self.draw_steps, self.mix = torch.device(device), draw_steps, mix

    def draw(self, index: int) -> torch.Tensor:
        """(draw_steps, batch_size, seq_len): this process's batches of steps index * draw_steps onwards."""
        # hash (seed, index) first: generators seeded with neighbouring numbers start out alike
        key = mix(torch.tensor([self.seed * 1_000_003 + index]))
        generator = torch.Generator(self.device).manual_seed(int(key) & (2**63 - 1))
        n, steps = self.batch_size * self.world_size, range(index * self.draw_steps, (index + 1) * self.draw_steps)
        if self.mix is None:  # uniform problems of the trained width
            problems = self.encoder.encode(*self.sampler.sample("train", n * len(steps), generator))
        else:  # what research mixes in (data/mixing.py): hard cases, other widths
            problems = self.mix.draw(self, n, steps, generator)
        batches = problems.view(len(steps), n, -1)  # (draw_steps, global batch, seq_len)
        return batches[:, self.rank * self.batch_size : (self.rank + 1) * self.batch_size]

    def __iter__(self):
        index, skip = divmod(self.start, self.draw_steps)
        while True:
            yield from self.draw(index)[skip:]
            index, skip = index + 1, 0
