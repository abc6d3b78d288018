"""LightningDataModule for arithmetic strings: :class:`ArithmeticData`'s splits (data/arithmetic.py) as the
training, validation and test loaders a Trainer asks for."""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader

from data.arithmetic import ArithmeticData
from data.stream import ShuffledEpochs


class ArithmeticDataModule(ArithmeticData, L.LightningDataModule):
    """:class:`ArithmeticData` (its arguments: the format, batch sizes, streaming, the held-out sets, the seed),
    loaded by a Trainer: each process of a run streams its own share, from the step it resumes at."""

    def train_dataloader(self):
        trainer = self.trainer  # None outside a Trainer (e.g. in tests): one process on the CPU, from the start
        rank, world = (trainer.global_rank, trainer.world_size) if trainer else (0, 1)
        steps_done = (lambda: trainer.global_step) if trainer else (lambda: 0)  # a resumed run goes on from there
        if self.streaming:
            device = trainer.strategy.root_device if trainer else "cpu"
            return DataLoader(self.training_stream(device, steps_done(), rank, world), batch_size=None)
        generator = torch.Generator().manual_seed(self.seed)
        fixed = self.encoder.encode(*self.sampler.sample("train", self.n_train, generator))[rank::world]
        return DataLoader(ShuffledEpochs(fixed, self.batch_size, self.seed, steps_done), batch_size=None)

    def _eval_loader(self, split: str) -> DataLoader:
        return DataLoader(self.held_out_set(split), batch_size=self.eval_batch_size)

    def val_dataloader(self):
        return self._eval_loader("val")

    def test_dataloader(self):
        return self._eval_loader("test")
