"""What every notebook in this folder needs first: the repository on the import path, a quiet Lightning,
one function that trains a calculator, a way to show the project's figures inline, and the exercises'
check that an answer was given.

``import lessons`` works when the notebook runs from this folder (Jupyter's default). Nothing here
re-implements the project: ``train_calculator`` is ``data.datamodule`` + ``training.module`` + a plain
``lightning.Trainer``, as in notebook 02, where those lines are written out one by one.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import lightning as L  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.callbacks import EarlyStopping  # noqa: E402

from data.arithmetic import DataConfig  # noqa: E402
from data.datamodule import ArithmeticDataModule  # noqa: E402
from model.build import own_block, transformer_config  # noqa: E402
from training import TARGET_ACCURACY  # noqa: E402
from training.load import calculator_module  # noqa: E402
from training.module import CalculatorModule  # noqa: E402
from training.optim import OptimConfig  # noqa: E402
from training.threads import use_threads  # noqa: E402

use_threads()  # one thread, or OMP_NUM_THREADS: the project's rule (training/threads.py), as every command

# Lightning's start-up lines (GPU available: False, ...) and its hints would bury the lesson's own output.
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", module="lightning")


@dataclass
class Trained:
    module: CalculatorModule  # in eval mode
    data: ArithmeticDataModule
    seconds: float  # wall time of trainer.fit
    steps: int

    @property
    def test(self) -> torch.Tensor:
        """The held-out test problems, (n_test, seq_len) token ids: never seen in training."""
        return self.data.held_out_set("test")

    @property
    def history(self) -> list[dict]:
        """One entry per validation: step, exact_match, loss."""
        return self.module.val_history


def train_calculator(
    digits: int = 3,
    d_model: int = 64,
    n_heads: int = 4,
    n_kv_heads: int | None = None,
    n_layers: int = 2,
    max_steps: int = 1500,
    stop_at: float | None = TARGET_ACCURACY,
    val_every: int = 100,
    seed: int = 0,
    n_val: int = 1000,
    n_test: int = 2000,
    attention: type | None = None,
) -> Trained:
    """Train a calculator on ``digits``-digit addition, validating every ``val_every`` steps.

    stop_at: stop once validation exact-match exceeds it (None trains all ``max_steps``, so that curves of
    several models compare step for step). The recipe is the project's default (configs/optim/adamw.yaml).
    attention: a block class written as the lesson writes it (notebook 05), checked by model/check.py and then
    built into every layer in place of ours, as ``python train.py model.attention=FILE.py:CLASS`` does.
    """
    L.seed_everything(seed, verbose=False)
    data = ArithmeticDataModule(
        DataConfig(digits=digits, operators="+", batch_size=256, n_val=n_val, n_test=n_test, seed=seed)
    )
    model = dict(
        vocab_size=data.vocab_size,
        block_size=data.fmt.seq_len,
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        n_layers=n_layers,
    )
    module = calculator_module(
        model=model,
        fmt=data.fmt.to_dict(),
        optim=OptimConfig().to_dict(),  # the project's recipe: configs/optim/adamw.yaml, the same values
        attention=None if attention is None else own_block(attention, transformer_config(**model)),
    )
    callbacks = (
        []
        if stop_at is None
        else [EarlyStopping(monitor="val/exact_match", mode="max", stopping_threshold=stop_at, patience=10**6)]
    )
    trainer = L.Trainer(
        max_steps=max_steps,
        val_check_interval=val_every,
        check_val_every_n_epoch=None,
        accelerator="cpu",
        devices=1,
        gradient_clip_val=1.0,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
    )
    started = time.perf_counter()
    trainer.fit(module, datamodule=data)
    return Trained(module.eval(), data, time.perf_counter() - started, trainer.global_step)


def show(figure):
    """A figure drawn by analysis.plots (a matplotlib Figure), shown inline in the notebook as a PNG."""
    import io

    from IPython.display import Image

    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=90)
    return Image(data=png.getvalue())


class Unanswered(Exception):
    """An exercise cell run with its ``...`` still in place of an answer."""


def answered(*answers) -> None:
    """Raise :class:`Unanswered` while any answer is still ``...`` (an exercise as the notebook ships it)."""
    if any(answer is ... for answer in answers):
        raise Unanswered("replace each ... with your answer and run the cell again (a worked solution is below it)")
