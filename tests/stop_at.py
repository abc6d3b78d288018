"""``python tests/stop_at.py WHEN[:SIGNAL[:RANK]] [overrides]``: ``train.py`` sent a real signal by itself at a chosen
moment -- an interruption at a chosen step, for the exact-resume tests (tests/test_exact_resume.py,
tests/test_signals.py). The run's own machinery (GracefulStop, Run) does the rest.

WHEN     a step (1-based: sent while the run trains it, so after it ``global_step == WHEN``), or ``test``: as the
         test's first batch begins
SIGNAL   SIGINT (Ctrl-C, the default) or SIGTERM
RANK     the process of a multi-process run it is sent to: 0 (the first, the default) or 1 (the first process's
         child, Lightning's second process); it arrives there when that process next runs Python, so a signal sent
         to rank 1 may stop the run one step later
"""

import os
import runpy
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training.callbacks import GracefulStop  # noqa: E402

SPEC = sys.argv.pop(1).split(":")
WHEN, SIGNAL, RANK = SPEC + ["20", "SIGINT", "0"][len(SPEC) :]  # "20" -> "20", "SIGINT", "0"


def send(trainer) -> None:
    pid = os.getpid() if RANK == "0" else trainer.strategy.launcher.procs[int(RANK) - 1].pid
    os.kill(pid, signal.Signals[SIGNAL])  # handled at once, in this thread: the step under way finishes


def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
    if WHEN != "test" and trainer.global_step == int(WHEN) - 1:
        send(trainer)


def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
    if WHEN == "test" and batch_idx == 0:
        send(trainer)


GracefulStop.on_train_batch_start = on_train_batch_start
GracefulStop.on_test_batch_start = on_test_batch_start
sys.argv[0] = str(ROOT / "train.py")
runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
