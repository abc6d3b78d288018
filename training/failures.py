"""How a run ends when it does not end well: one line on the terminal, the run directory marked, an exit code.

    2    a configuration mistake (ConfigError), before anything was trained
    3    training stopped: the loss became NaN/inf, another process of a multi-process run ended in its middle, or
         (outside a sweep) an unexpected error
    130  interrupted by Ctrl-C (SIGINT), 143 by SIGTERM (128 + the signal), in any phase; the line says what the
         run holds and how to continue (training/signals.py, train.py). A multi-process run: the first process
         says it, once, and ends with that code; the others end quietly with 0

A bug outside a sweep shows its traceback (what a developer needs); inside a sweep the job fails alone, its
traceback goes to error.log, and the sweep summary lists it. Nothing a finished or resumable run wrote is
overwritten (:meth:`RunDir.mark_failed`), and a directory the failed command created for nothing is removed.
"""

from __future__ import annotations

import errno
import signal
import sys
import traceback
from pathlib import Path

from storage.rundir import RunDir, RunDirError, override
from training.config import ConfigError
from training.signals import Signalled, a_worker_process, exit_code, signal_name, was_signalled


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; the last good weights were saved: those from before that step,
    or, where the loss is checked every n steps (on a GPU), those of ``good_step``, the last check before it."""

    def __init__(self, step: int, loss: float, checkpoint: Path, good_step: int | None = None):
        when = f"at step {step}" if good_step is None else f"between steps {good_step} and {step}"
        weights = "from before that step" if good_step is None else f"of step {good_step}"
        super().__init__(
            f"training loss became {loss} {when}; the weights {weights} are in {checkpoint}. "
            "Lower optim.lr or raise optim.warmup_steps and start again"
        )
        self.step, self.loss, self.checkpoint, self.good_step = step, loss, checkpoint, good_step


class Interrupted(Exception):
    """A signal stopped the run and its true status is written; the message says what it holds and how to go on."""

    def __init__(self, message: str, signum: int = signal.SIGINT):
        super().__init__(message)
        self.signum = signum


class PeerEnded(Exception):
    """Another process of a multi-process run ended in its middle (killed, crashed), and this one stopped with it:
    the record stays as it was ("running", as after ``kill -9``); the message says how to continue."""


class DiskFull(Exception):
    """The disk filled up while the run was writing."""


EXIT_CONFIG, EXIT_TRAINING, EXIT_INTERRUPTED, EXIT_TERMINATED = (
    2,
    3,
    exit_code(signal.SIGINT),
    exit_code(signal.SIGTERM),
)
# The other processes of a multi-process run end with 0 once a signal stopped it: Lightning's launcher kills every
# process, the first one too (SIGKILL, within 5 s), as soon as one of them ends with anything else.
EXIT_WORKER_STOPPED = 0


def handle_failure(error: BaseException, run_dir: RunDir, in_sweep: bool, started: bool) -> int | None:
    """Report ``error`` and return the exit code (None: the sweep goes on); re-raise a bug outside a sweep.

    started: whether this invocation had claimed the run directory (and so may write into it).
    """
    stopped = (Interrupted, Signalled, KeyboardInterrupt, PeerEnded)
    if a_worker_process() and (isinstance(error, stopped) or was_signalled()):
        # the first process says what the signal left, writes it and ends with its code; what a signalled worker
        # met after it (its peers gone in the middle of a collective) is the signal's doing, not a failure
        return EXIT_WORKER_STOPPED
    if isinstance(error, PeerEnded):
        print(f"error: {error}", file=sys.stderr)
        return None if in_sweep else EXIT_TRAINING
    if isinstance(error, Interrupted):
        print(f"interrupted: {error}", file=sys.stderr)
        return exit_code(error.signum)
    if isinstance(error, (Signalled, KeyboardInterrupt)):  # train.py turns a signal in a phase it ran into Interrupted
        signum = error.signum if isinstance(error, Signalled) else signal.SIGINT
        message = f"interrupted ({signal_name(signum)}) before training started; nothing to resume"
        print(f"interrupted: {message}", file=sys.stderr)
        if started:
            run_dir.mark_failed(message)  # never over a finished or resumable run's results
        else:
            run_dir.discard_if_unused()
        return exit_code(signum)
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        error = DiskFull(
            f"no space left on the disk ({error.filename or run_dir}); free some and start again"
            + (
                f", or continue with  python train.py {override('resume', run_dir.best_checkpoint)}"
                if run_dir.best_checkpoint.is_file()
                else ""
            )
        )
    expected = isinstance(error, (ConfigError, RunDirError, NonFiniteLossError, DiskFull))
    if not (expected or in_sweep):
        if started:
            run_dir.mark_failed(f"{type(error).__name__}: {error}")
        raise error  # a bug, not a bad value: the traceback is what a developer needs
    message = str(error) if expected else f"{type(error).__name__}: {error}"
    if not expected and started:  # keep the traceback in the job's directory, not on the terminal
        RunDir.write_text(run_dir.error_log, "".join(traceback.format_exception(error)))  # atomic, never via a link
        message += f" (traceback in {run_dir.error_log})"
    print(f"error: {message}", file=sys.stderr)
    # a sweep's summary reads each job's failure from its results.json -- but a job refused because another run
    # holds (or has used) its directory writes nothing there: those results are that run's
    if started or (in_sweep and not run_dir.used() and not run_dir.owner()):
        try:
            run_dir.mark_failed(message)
        except OSError:  # e.g. the disk is still full: the line above has said what happened
            pass
    else:
        run_dir.discard_if_unused()  # nothing began: leave no directory behind
    if in_sweep:
        return None
    return EXIT_CONFIG if isinstance(error, (ConfigError, RunDirError)) else EXIT_TRAINING
