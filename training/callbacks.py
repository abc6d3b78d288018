"""The run's own Lightning callbacks: the best checkpoint, Ctrl-C / SIGTERM at a step boundary with a
checkpoint, and a guard on the loss. Listed in configs/callbacks/default.yaml; each asks the
:class:`RunDir` where its file goes.
"""

from __future__ import annotations

import copy
import io
import math
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint, RichProgressBar
from lightning.pytorch.callbacks.progress.rich_progress import CustomBarColumn, RichProgressBarTheme
from lightning.pytorch.plugins.io import TorchCheckpointIO
from rich.progress import ProgressColumn, TextColumn
from rich.text import Text

from storage.rundir import RunDir, write_atomically
from training.failures import NonFiniteLossError
from training.signals import SIGNALS, know_the_peers, received, stop_at_once


class AtomicCheckpointIO(TorchCheckpointIO):
    """Every checkpoint the trainer writes, crash-safe: Lightning's own IO opens the file and writes into it, so a
    kill or a full disk mid-write leaves half a checkpoint. Here it goes to a temporary file beside ``path``, is
    flushed to the disk and renamed over it (:func:`write_atomically`): ``path`` is the old file or the whole new one,
    and a full disk names ``path``. The trainer takes it as a plugin (training/assemble.py)."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)

        def write(tmp: Path) -> None:
            with buffer.getbuffer() as view:  # released even when the write fails (a full disk): no copy, no leak
                tmp.write_bytes(view)

        write_atomically(Path(path), write)


def save_checkpoint(trainer: L.Trainer, path: str | Path, weights_only: bool = False) -> Path:
    """``trainer.save_checkpoint`` through :class:`AtomicCheckpointIO` (a trainer built without it gets it here).
    Called on every process, like ``trainer.save_checkpoint``; the first one writes."""
    if not isinstance(trainer.strategy.checkpoint_io, AtomicCheckpointIO):
        trainer.strategy.checkpoint_io = AtomicCheckpointIO()
    trainer.save_checkpoint(path, weights_only)
    return Path(path)


class GracefulStop(L.Callback):
    """On Ctrl-C or SIGTERM, finish the current step, save ``checkpoints/interrupted.ckpt`` and stop.

    The training ends with the step under way as if ``max_steps`` were reached there: a validation due at that step
    runs, as it would have, and no other (Lightning's ``should_stop`` adds one, which moves ``best.ckpt``). The
    checkpoint is saved once the training has ended (``on_train_end``), so it holds everything of the step, its
    validation and best weights included: the resumed run goes on exactly as the run would have. A run whose training
    had ended on its own at that step (early stopping) is saved as ended (:meth:`state_dict`): its resumption
    trains nothing more.

    A second signal stops at once (:class:`training.signals.Signalled`, which ``train.py`` turns into a true status
    and the same exit code); outside training the handlers from before (``train.py``'s own) take them again. In a
    multi-process run the processes agree after each step on whether any received a signal (:meth:`_agree`), so all
    stop at the same step and save the same checkpoint.
    """

    def __init__(self, run_dir: str | Path):
        self.path = RunDir(run_dir).interrupted_checkpoint
        self.received: int | None = None  # the signal this process received (a second one stops it at once)
        self.signal: int | None = None  # the signal the run stops on: received here, or by any process (DDP)
        self.saved: Path | None = None
        self.ended = False  # the training had ended on its own at the saved step (saved in the checkpoint)
        self._previous: dict[int, object] = {}
        self._training = False
        self._speaks = True  # the process that prints (rank 0)

    def _request(self, signum, frame) -> None:
        if self.received is not None or not self._training:  # a second signal to this process, or one outside fit
            stop_at_once(signum)  # not KeyboardInterrupt: Lightning answers that with exit(1) and no line
            return
        self.received = signum
        received(signum)
        if self._speaks:
            print(f"\nstopping after this step ({signal.Signals(signum).name}); again to stop at once", flush=True)

    def _agree(self, trainer, pl_module) -> None:
        """``signal`` from what this process received -- under DDP from what any received, the same value in every
        process (one collective): a signal that lands during the collective counts at the next step, never in one
        process only."""
        if trainer.world_size == 1:
            self.signal = self.signal or self.received
            return
        asked = torch.tensor(self.received or 0, device=pl_module.device)  # 0, or the signal's number
        self.signal = self.signal or int(trainer.strategy.reduce(asked, reduce_op="max")) or None  # SIGTERM over INT

    def state_dict(self) -> dict:
        return {"ended": self.ended}

    def load_state_dict(self, state_dict: dict) -> None:
        self.ended = state_dict.get("ended") is True

    def on_fit_start(self, trainer, pl_module) -> None:
        # every process: a Ctrl-C reaches them all, a SIGTERM maybe one (_agree, at each step's end, makes them
        # agree); Lightning's own SIGTERM handler, installed after this, is kept off (TheRunsSignals)
        self._previous = {s: signal.signal(s, self._request) for s in (signal.SIGINT, signal.SIGTERM)}
        self._training, self._speaks = True, trainer.is_global_zero

    def on_train_start(self, trainer, pl_module) -> None:
        if self.ended:  # resumed from a step at which the training had ended: it stays ended
            trainer.should_stop = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._agree(trainer, pl_module)
        if self.signal is not None and self.saved is None:
            # the training loop's own end (its max_steps, which the Trainer set); should_stop would validate once more
            trainer.fit_loop.epoch_loop.max_steps = trainer.global_step

    def on_train_end(self, trainer, pl_module) -> None:
        self._agree(trainer, pl_module)  # a signal during the last step's validation
        if self.signal is not None and self.saved is None:
            self.ended = trainer.should_stop  # only early stopping sets it: the run's training is over
            save_checkpoint(trainer, self.path)
            self.saved = self.path

    def on_fit_end(self, trainer, pl_module) -> None:
        self._training = False
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}  # once: on_exception after on_fit_end (a signal in the test) must not re-install them

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self.on_fit_end(trainer, pl_module)  # restore the handlers however fit ends


class TheRunsSignals(L.Callback):
    """The run's handlers stay the only ones for SIGINT and SIGTERM while the trainer fits, validates and tests.

    Why: in every ``trainer.fit`` / ``trainer.test`` Lightning 2.x installs its own SIGTERM handler after
    ``on_fit_start``, composed with the run's. It sets ``trainer.received_sigterm``, on which the loops raise
    ``SIGTERMException`` -- a SystemExit: the process ends with 0 at the step's end, nothing saved, nothing recorded
    -- and under DDP it signals the other processes and calls a collective from inside the handler, which stalls a
    process waiting in another one. The run's own handlers do that job already (the step finished and saved, every
    process stopping at the same step: :class:`GracefulStop`; a true record: training/run.py). Lightning has no
    switch for it; this callback puts the run's handlers back in the first hooks after Lightning's (a sanity check,
    the training, a validation, the test), which its teardown then restores too. Between the two lie only the
    processes' barrier and the loop's first dataloader: a SIGTERM there still reaches the run's handler, after
    Lightning's. ``build_trainer`` lists it last, so the handlers it keeps are the ones :class:`GracefulStop` set."""

    def __init__(self):
        self.handlers: dict[int, object] = {}

    def _keep(self) -> None:
        self.handlers = {signum: signal.getsignal(signum) for signum in SIGNALS}

    def setup(self, trainer, pl_module, stage: str) -> None:
        know_the_peers(trainer)  # the launcher has started the other processes by now
        self._keep()  # the test's: train.py's StopOnSignal

    def on_fit_start(self, trainer, pl_module) -> None:
        self._keep()  # the training's: GracefulStop's, set in its own on_fit_start

    def _take_back(self, trainer, pl_module) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, handler in self.handlers.items():
            if handler is not None and signal.getsignal(signum) is not handler:  # None: set outside Python
                signal.signal(signum, handler)

    on_sanity_check_start = on_train_start = on_validation_start = on_test_start = _take_back


class FiniteLossGuard(L.Callback):
    """Stop with a clear message when the loss is not finite, keeping the last good weights.

    On the CPU each step's loss is read before its backward pass (free there), so the run stops before the bad
    update. Reading a GPU's loss stalls its queue of work, so there (``every_n_steps`` null = 1 on the CPU,
    ``ACCELERATOR_EVERY`` otherwise) the guard keeps the last non-finite loss on the device, reads it every n
    steps, and keeps a device copy of the weights and optimizer state of the last step it found good: a NaN at
    step t stops the run at the next check with the weights of the check before t.
    """

    ACCELERATOR_EVERY = 100

    def __init__(self, run_dir: str | Path, every_n_steps: int | None = None):
        if every_n_steps is not None and (
            not isinstance(every_n_steps, int) or isinstance(every_n_steps, bool) or every_n_steps < 1
        ):
            raise ValueError(f"every_n_steps={every_n_steps!r}: must be a whole number >= 1, or null (by device)")
        self.path = RunDir(run_dir).last_good_checkpoint
        self.every_n_steps = every_n_steps
        self.every = 1
        self._bad: torch.Tensor | None = None  # the last non-finite loss since the last check, else 0
        self._good: tuple[int, dict, list[dict]] | None = None  # (step, weights, optimizer states) found good

    def on_train_start(self, trainer, pl_module) -> None:
        self.every = self.every_n_steps or (1 if pl_module.device.type == "cpu" else self.ACCELERATOR_EVERY)
        if self.every > 1:
            self._bad = torch.zeros((), device=pl_module.device)
            self._keep_good(trainer, pl_module)

    def on_before_backward(self, trainer, pl_module, loss: torch.Tensor) -> None:
        if self.every > 1:  # no host sync: noted on the device, read at the next check
            loss = loss.detach().float()
            self._bad = torch.where(torch.isfinite(loss), self._bad, loss)
            return
        value = loss.item()
        if not math.isfinite(value):  # nothing has been updated by this step yet: the weights are good
            save_checkpoint(trainer, self.path)
            raise NonFiniteLossError(trainer.global_step, value, self.path)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.every > 1 and trainer.global_step % self.every == 0:
            self._check(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        if self.every > 1:
            self._check(trainer, pl_module)  # the steps since the last check

    def _check(self, trainer, pl_module) -> None:
        value = self._bad.item()  # the one host sync every n steps
        if math.isfinite(value):
            self._keep_good(trainer, pl_module)
            return
        step, weights, optimizer_states = self._good
        pl_module.load_state_dict(weights)
        for optimizer, state in zip(trainer.optimizers, optimizer_states, strict=True):
            optimizer.load_state_dict(state)
        save_checkpoint(trainer, self.path)
        raise NonFiniteLossError(trainer.global_step, value, self.path, good_step=step)

    def _keep_good(self, trainer, pl_module) -> None:
        weights = {name: t.detach().clone() for name, t in pl_module.state_dict().items()}
        self._good = (trainer.global_step, weights, [copy.deepcopy(o.state_dict()) for o in trainer.optimizers])


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

    @property
    def path(self) -> str:
        """The one file it writes: checkpoints/best.ckpt of this run."""
        return str(Path(self.dirpath) / f"{self.filename}{self.FILE_EXTENSION}")

    def load_state_dict(self, state_dict: dict) -> None:
        """The state of a checkpoint (the best score so far, and where its weights are), taken as this run
        directory's: the paths saved are where the run was then -- the directory may have been moved or copied
        since, and a run directory is data -- so each names this run's best.ckpt, whatever it says."""
        here = lambda saved: self.path if saved else saved  # noqa: E731 -- "" / None: nothing saved yet
        state = dict(state_dict, dirpath=self.dirpath)
        for key in ("best_model_path", "kth_best_model_path", "last_model_path"):
            if key in state:
                state[key] = here(state[key])
        if isinstance(state.get("best_k_models"), dict):
            state["best_k_models"] = {here(p): score for p, score in state["best_k_models"].items()}
        super().load_state_dict(state)

    def check_monitor_top_k(self, trainer: L.Trainer, current: torch.Tensor | None = None) -> bool:
        """Save on a tie with the best too: of equally good weights -- every validation problem right, say -- the
        later ones, trained longest (and, under a decaying learning rate, most settled), are the ones kept."""
        if current is None or not self.best_k_models:
            return super().check_monitor_top_k(trainer, current)
        tied_or_better = bool(current >= self.best_k_models[self.kth_best_model_path])
        return trainer.strategy.reduce_boolean_decision(tied_or_better)


class TargetStop(EarlyStopping):
    """Lightning's EarlyStopping (every setting its own: ``callbacks.early_stopping.*``), whose stop at
    ``stopping_threshold`` waits, when ``loss_below`` is set, until the validation loss is under it too: the run
    stops at the first validation with every problem right (target_accuracy) whose loss is under target_loss
    (configs/train.yaml) -- every answer right by a margin, not by a hair."""

    def __init__(self, *args, loss_below: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_below = loss_below

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        with self._threshold_after_margin(trainer):
            super().on_validation_end(trainer, pl_module)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        with self._threshold_after_margin(trainer):
            super().on_train_epoch_end(trainer, pl_module)

    @contextmanager
    def _threshold_after_margin(self, trainer: L.Trainer) -> Iterator[None]:
        """EarlyStopping's own check (its public hooks, its public ``stopping_threshold``), the threshold held back
        while the validation loss is not yet under ``loss_below``: right, but not yet by the margin asked."""
        loss = trainer.callback_metrics.get("val/loss")
        threshold = self.stopping_threshold
        if self.loss_below is not None and not (loss is not None and float(loss) < self.loss_below):
            self.stopping_threshold = None
        try:
            yield
        finally:
            self.stopping_threshold = threshold


class StepsColumn(ProgressColumn):
    """``800/≤1,800`` (steps) while training (the run may stop early at the target), the count elsewhere."""

    def __init__(self, trainer: L.Trainer, style: str = ""):
        self.trainer, self.style = trainer, style
        super().__init__()

    def render(self, task) -> Text:
        done, total = int(task.completed), task.total
        fitting = self.trainer.state.fn == "fit" and task.description == "training"
        if fitting:  # the run's steps, also when it resumed part-way (the task counts this process's batches)
            done, total = self.trainer.global_step, self.trainer.max_steps
        if total is None or total == float("inf") or total < 0:
            return Text(f"{done:,}", style=self.style)
        early = fitting and getattr(self.trainer.early_stopping_callback, "stopping_threshold", None) is not None
        return Text(f"{done:,}/{'≤' if early else ''}{int(total):,}", style=self.style)


class ElapsedColumn(ProgressColumn):
    """The time so far. No time remaining: a run that stops at its target would be told to wait for max_steps."""

    max_refresh = 0.5

    def __init__(self, style: str = ""):
        self.style = style
        super().__init__()

    def render(self, task) -> Text:
        elapsed = task.finished_time if task.finished else task.elapsed
        return Text("" if elapsed is None else f"{int(elapsed) // 60}:{int(elapsed) % 60:02d}", style=self.style)


class StepProgressBar(RichProgressBar):
    """Rich's bar, labelled by what the run counts: steps of an endless stream, not 'Epoch 0/-2'.

    Columns: the steps done out of at most ``max_steps`` (training stops earlier once ``target_accuracy`` is
    reached, so no time-remaining estimate is shown), the time so far, and the metrics by their full names
    (``val/exact_match``, ``train/loss``; Lightning's ``v_num`` is left out). It moves at most
    ``updates_per_second`` times a second (redrawing it every step costs a launch-bound GPU step a noticeable share
    of its host time), and shows the training loss that the module logs every ``trainer.log_every_n_steps``
    steps: reading it back is a host sync on a GPU.
    """

    def __init__(self, *args, updates_per_second: float = 10.0, theme: RichProgressBarTheme | None = None, **kwargs):
        # a theme of its own: RichProgressBar's default is one object shared by every bar of the process
        super().__init__(*args, theme=theme or RichProgressBarTheme(metrics_text_delimiter="  "), **kwargs)
        self.min_interval = 1.0 / updates_per_second
        self._loss, self._loss_step = None, -(10**9)  # the loss shown, and the step it was read at
        self._moved = 0.0  # when the bar last moved (time.perf_counter)

    def _get_train_description(self, current_epoch: int) -> str:
        return "training"

    def configure_columns(self, trainer: L.Trainer) -> list:
        return [
            TextColumn("[progress.description]{task.description}"),
            CustomBarColumn(
                bar_width=12,
                complete_style=self.theme.progress_bar,
                finished_style=self.theme.progress_bar_finished,
                pulse_style=self.theme.progress_bar_pulse,
            ),
            StepsColumn(trainer, style=self.theme.batch_progress),
            ElapsedColumn(style=self.theme.time),
        ]

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        now = time.perf_counter()
        last = trainer.global_step >= trainer.max_steps or trainer.global_step % trainer.val_check_interval == 0
        if now - self._moved >= self.min_interval or last:  # and before each validation and at the end
            self._moved = now
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def get_metrics(self, trainer, pl_module) -> dict:
        shown = {k: v for k, v in super().get_metrics(trainer, pl_module).items() if k != "v_num"}
        loss = trainer.callback_metrics.get("train/loss")  # the value logged last, on the device
        if loss is not None and trainer.global_step >= self._loss_step + trainer.log_every_n_steps:
            self._loss, self._loss_step = loss.item(), trainer.global_step  # at most one read per n steps
        return shown if self._loss is None else {**shown, "train/loss": round(self._loss, 4)}


class SlowStepsNote(L.Callback):
    """Says once, in one line, when the run's first steps on a CPU got less than half a core per thread: other work
    is using the machine, so the run is slower than the machine can give, and what to do
    (:func:`training.threads.slow_steps_note`). Measured from step ``skip`` (start-up done) over ``steps`` steps:
    the process's CPU time against the wall time, a reading of two clocks per step."""

    def __init__(self, steps: int = 40, skip: int = 5):
        self.steps, self.skip = steps, skip
        self._seen, self._wall, self._cpu = 0, 0.0, 0.0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._seen += 1
        if self._seen == self.skip:
            self._wall, self._cpu = time.perf_counter(), time.process_time()
        elif self._seen == self.skip + self.steps and pl_module.device.type == "cpu" and trainer.is_global_zero:
            from training.threads import slow_steps_note

            wall, cpu = time.perf_counter() - self._wall, time.process_time() - self._cpu
            note = slow_steps_note(cpu, wall, torch.get_num_threads(), self.steps)
            progress = getattr(trainer.progress_bar_callback, "progress", None)  # a live rich bar: above it
            if note and progress is not None:
                progress.console.print(note, highlight=False, soft_wrap=True)  # one line, however narrow
            elif note:
                print(note, file=sys.stderr, flush=True)
