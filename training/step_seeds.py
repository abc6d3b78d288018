"""Exact resume's random draws: each training step's (dropout, a position scheme's moved places) seeded from the
run's seed and the step, as a Lightning callback beside the lesson's module (training/module.py), which draws from
torch's generators as they stand without it. training/assemble.py adds it to every run."""

from __future__ import annotations

import lightning as L
import torch

from data.seeds import derived_seed


class StepSeeds(L.Callback):
    """Seeds torch's CPU and CUDA generators before each training step from (``seed``, step), as the step's batch
    is drawn (data/stream.py): a run resumed at any step draws what the same run uninterrupted draws there, whatever
    was drawn between the steps (a validation's loader, a restart)."""

    def __init__(self, seed: int):
        self.seed = seed

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        seed = derived_seed("step", self.seed, trainer.global_step)
        torch.default_generator.manual_seed(seed)  # what torch.manual_seed seeds, without its queue below
        if torch.cuda.is_initialized():  # torch.manual_seed would queue this call, with a formatted stack, every step
            torch.cuda.manual_seed_all(seed)
