"""``streaming=false``: a fixed training set of ``n_train`` problems, trained on an epoch a pass instead of the lesson's
stream of fresh batches (data/stream.py). Research beside the lesson: data/build.py hands a :class:`FixedSet` to the
data, whose loader (data/datamodule.py) then serves its epochs."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch.utils.data import IterableDataset

from data.checks import check_whole
from data.seeds import derived_seed


class FixedSet:
    """The ``n_train`` training problems drawn once from the data's seed, as :class:`ShuffledEpochs`."""

    def __init__(self, n_train: int):
        self.n_train = n_train

    @staticmethod
    def check(streaming: bool, n_train: int, batch_size: int) -> None:
        """ValueError unless the datamodule's streaming and n_train settings are ones it can train on."""
        if not isinstance(streaming, bool):
            raise ValueError(f"streaming={streaming!r}: must be true or false")
        check_whole("n_train", n_train)
        if not streaming and n_train < batch_size:  # drop_last would leave not one training batch
            raise ValueError(f"n_train={n_train}: must be at least batch_size={batch_size} when streaming is false")

    def epochs(self, data, steps_done: Callable[[], int], rank: int = 0, world_size: int = 1) -> ShuffledEpochs:
        """Process ``rank``'s share of the set (``data``: an ArithmeticData), its epochs from ``steps_done()`` on."""
        generator = torch.Generator().manual_seed(data.seed)
        fixed = data.encoder.encode(*data.sampler.sample("train", self.n_train, generator))[rank::world_size]
        return ShuffledEpochs(fixed, data.batch_size, data.seed, steps_done)


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
