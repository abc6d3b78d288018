"""``compile=``: the training step's forward and backward through ``torch.compile``, as a Lightning callback beside
the lesson's module (training/module.py), which trains eagerly without it. training/assemble.py adds it when the run
asks for a mode; evaluation always stays eager."""

from __future__ import annotations

import lightning as L
import torch

COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")  # torch.compile
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes that capture CUDA graphs on a GPU


class CompiledStep(L.Callback):
    """Compiles the module's ``training_loss`` in ``mode`` (a ValueError, the key named, for a mode torch.compile
    does not have; null: nothing to do) -- the loss function, not the module, so the state dict keeps its keys
    and checkpoints stay the eager run's."""

    def __init__(self, mode: str | None):
        if mode not in COMPILE_MODES:
            modes = ", ".join(m for m in COMPILE_MODES if m)
            raise ValueError(f"compile={mode!r}: use null (eager) or a torch.compile mode: {modes}")
        self.mode = mode

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit" and self.mode:
            pl_module.training_loss = torch.compile(pl_module.teacher_forced_loss, mode=self.mode)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        if self.mode in CUDA_GRAPH_MODES:
            torch.compiler.cudagraph_mark_step_begin()  # a new step: the last step's graph outputs may be reused
