"""LightningDataModule for arithmetic strings: :class:`ArithmeticData`'s splits (data/arithmetic.py) as the
training, validation and test loaders a Trainer asks for."""

from __future__ import annotations

import lightning as L
from torch.utils.data import DataLoader

from data.arithmetic import ArithmeticData, DataConfig


class ArithmeticDataModule(L.LightningDataModule):
    """``data``, an :class:`ArithmeticData` (data/build.py builds one with the research pieces its settings ask
    for), or the :class:`DataConfig` of the lesson's (the format, batch sizes, the held-out sets, the seed),
    loaded by a Trainer: each process of a run streams its own share, from the step it resumes at."""

    def __init__(self, data: ArithmeticData | DataConfig | None = None):
        super().__init__()
        self.data = data if isinstance(data, ArithmeticData) else ArithmeticData(data)
        self.fmt, self.tokenizer, self.vocab_size = self.data.fmt, self.data.tokenizer, self.data.vocab_size
        self.held_out_set, self.training_stream = self.data.held_out_set, self.data.training_stream

    def train_dataloader(self):
        trainer = self.trainer  # None outside a Trainer (e.g. in tests): one process on the CPU, from the start
        rank, world = (trainer.global_rank, trainer.world_size) if trainer else (0, 1)
        steps_done = (lambda: trainer.global_step) if trainer else (lambda: 0)  # a resumed run goes on from there
        if self.data.fixed is not None:  # streaming=false: a fixed set's epochs (data/epochs.py, research)
            return DataLoader(self.data.fixed.epochs(self.data, steps_done, rank, world), batch_size=None)
        device = trainer.strategy.root_device if trainer else "cpu"
        return DataLoader(self.data.training_stream(device, steps_done(), rank, world), batch_size=None)

    def _eval_loader(self, split: str) -> DataLoader:
        return DataLoader(self.data.held_out_set(split), batch_size=self.data.eval_batch_size)

    def val_dataloader(self):
        return self._eval_loader("val")

    def test_dataloader(self):
        return self._eval_loader("test")
