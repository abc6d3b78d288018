"""The run's own Lightning callbacks: the best checkpoint, Ctrl-C / SIGTERM at a step boundary with a
checkpoint, and a guard on the loss. Listed in configs/callbacks/default.yaml; each asks the
:class:`RunDir` where its file goes.
"""

from __future__ import annotations

import math
import os
import signal
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, RichProgressBar

from training.failures import NonFiniteLossError
from training.rundir import RunDir


class GracefulStop(L.Callback):
    """On Ctrl-C or SIGTERM, finish the current step, save ``checkpoints/interrupted.ckpt`` and stop.

    A second Ctrl-C stops at once. Outside training (testing, analysis) Ctrl-C interrupts as usual.
    """

    def __init__(self, run_dir: str | Path):
        self.path = RunDir(run_dir).interrupted_checkpoint
        self.signal: int | None = None  # the signal that asked us to stop
        self.saved: Path | None = None
        self._previous: dict[int, object] = {}
        self._training = False

    def _request(self, signum, frame) -> None:
        if self.signal is not None or not self._training:
            raise KeyboardInterrupt
        self.signal = signum
        print(f"\nstopping after this step ({signal.Signals(signum).name}); again to stop at once", flush=True)

    def on_fit_start(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            self._previous = {s: signal.signal(s, self._request) for s in (signal.SIGINT, signal.SIGTERM)}
        self._training = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.signal is not None and self.saved is None:
            trainer.save_checkpoint(self.path)
            self.saved = self.path
            trainer.should_stop = True

    def on_fit_end(self, trainer, pl_module) -> None:
        self._training = False
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self.on_fit_end(trainer, pl_module)  # restore the handlers however fit ends


class FiniteLossGuard(L.Callback):
    """Stop with a clear message when the loss is not finite, keeping the last good weights."""

    def __init__(self, run_dir: str | Path):
        self.path = RunDir(run_dir).last_good_checkpoint

    def on_before_backward(self, trainer, pl_module, loss: torch.Tensor) -> None:
        value = loss.item()
        if not math.isfinite(value):  # nothing has been updated by this step yet: the weights are good
            trainer.save_checkpoint(self.path)
            raise NonFiniteLossError(trainer.global_step, value, self.path)


class BestCheckpoint(ModelCheckpoint):
    """Keep the weights with the best validation exact-match as ``checkpoints/best.ckpt``."""

    def __init__(self, run_dir: str | Path, monitor: str = "val/exact_match"):
        best = RunDir(run_dir).best_checkpoint
        super().__init__(
            dirpath=best.parent,
            filename=best.stem,
            monitor=monitor,
            mode="max",
            save_top_k=1,
            auto_insert_metric_name=False,
            enable_version_counter=False,
        )

    def _save_checkpoint(self, trainer: L.Trainer, filepath: str) -> None:
        """Write beside, then rename: a kill or a full disk mid-write leaves the previous best.ckpt whole."""
        partial = f"{filepath}.partial"
        super()._save_checkpoint(trainer, partial)
        if trainer.is_global_zero:
            os.replace(partial, filepath)
        self._last_checkpoint_saved = filepath


class StepProgressBar(RichProgressBar):
    """Rich's bar, labelled by what the run counts: steps of an endless stream, not 'Epoch 0/-2'."""

    def _get_train_description(self, current_epoch: int) -> str:
        return "training steps"
