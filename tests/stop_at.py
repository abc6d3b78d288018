"""``python tests/stop_at.py STEP [overrides]``: ``train.py`` sent a real Ctrl-C (SIGINT) by itself while it trains
step STEP (1-based: after it, ``global_step == STEP``) -- an interruption at a chosen step, for the exact-resume
tests (tests/test_exact_resume.py). The run's own machinery (GracefulStop, Run) does the rest."""

import os
import runpy
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training.callbacks import GracefulStop  # noqa: E402

STEP = int(sys.argv.pop(1))


def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
    if trainer.global_step == STEP - 1:
        os.kill(os.getpid(), signal.SIGINT)  # handled at once, in this thread: the step under way finishes


GracefulStop.on_train_batch_start = on_train_batch_start
sys.argv[0] = str(ROOT / "train.py")
runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
