"""Shared fixtures: the real Hydra config, composed the way train.py composes it."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
sys.path.insert(0, str(ROOT))

from training.cli import compose_train_config, with_run_dir  # noqa: E402, F401 -- tests import with_run_dir from here
from training.threads import use_threads  # noqa: E402

# The test process computes with the thread count every command uses (training/threads.py's rule, OMP_NUM_THREADS
# overriding it), not torch's one thread per core: on a shared machine a model trained in-process with a thread per
# busy core waits on every one of them (test_analysis.py's model took 154 s instead of 11 s under a load of 2).
use_threads()


def compose_config(overrides: list[str] | None = None):
    return compose_train_config(overrides or [])


def regenerate_module():
    """docs/regenerate.py as a module (it is a script, not a package member), loaded once."""
    if "regenerate" not in sys.modules:
        spec = importlib.util.spec_from_file_location("regenerate", ROOT / "docs" / "regenerate.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["regenerate"] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules["regenerate"]


@pytest.fixture
def make_config():
    return compose_config


def run_train(tmp_path: Path, *overrides: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``python train.py`` as a user would, with its run directory under tmp_path."""
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={tmp_path}", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# a sweep small enough for the fast suite: 2-digit addition, a few hundred held-out problems
# a task small enough for a test: 2-digit addition, a few hundred held-out problems
SMALL_TASK = [
    "data.digits=2",
    "data.val_fraction=0.05",
    "data.test_fraction=0.05",
    "data.n_val=200",
    "data.n_test=200",
]
# a short real run: 2-digit addition, 300 held-out problems each, validation every 50 steps, no wandb
SHORT_RUN = [
    "data.digits=2",
    "data.val_fraction=0.05",
    "data.test_fraction=0.05",
    "data.n_val=300",
    "data.n_test=300",
    "trainer.val_check_interval=50",
    "logger=none",
]
SMALL_SWEEP = [
    *SMALL_TASK,
    "trainer.max_steps=200",
    "trainer.val_check_interval=50",
    "logger=none",
]


def run_sweep(tmp_path: Path, *overrides: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``python train.py -m`` (a Hydra multirun) on SMALL_SWEEP, with its sweep directory at tmp_path."""
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "-m", *SMALL_SWEEP, *overrides, f"hydra.sweep.dir={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def small_sweep(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One real two-job sweep, ``model.n_heads=3,2`` on SMALL_SWEEP with the default analysis: the n_heads=3 job
    fails on its bad value, the n_heads=2 job trains. (sweep directory, the finished command). test_sweep.py reads
    its summary; test_html_report.py its pages (it replaces the trained job's mistakes and rewrites the pages)."""
    path = tmp_path_factory.mktemp("small_sweep")
    return path, run_sweep(path, "model.n_heads=3,2")


def make_run(run_dir: Path, operators: str, steps: int) -> Path:
    """A run directory (checkpoints/best.ckpt + tokenizer.json) of a small 2-digit model trained for ``steps``."""
    import torch

    from data.arithmetic import DataConfig
    from data.build import data_module
    from model.transformer import TransformerConfig
    from training.load import calculator_module
    from training.optim import OptimConfig

    torch.manual_seed(0)
    dm = data_module(
        DataConfig(
            digits=2, operators=operators, batch_size=128, val_fraction=0.05, test_fraction=0.05, n_val=10, n_test=10
        )
    )
    optim = OptimConfig(lr=1e-2, warmup_steps=20).to_dict()
    model = TransformerConfig(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len, d_model=32, n_heads=2)
    module = calculator_module(model=model.to_dict(), fmt=dm.fmt.to_dict(), optim=optim)
    fit(module, dm, steps, run_dir)
    return run_dir


def fit(module, dm, steps: int, run_dir: Path) -> None:
    """Train ``module`` on ``dm``'s stream for ``steps`` on the CPU, quietly, and save it as a run directory holds
    it (checkpoints/best.ckpt + tokenizer.json)."""
    import warnings

    import lightning as L

    from storage.rundir import RunDir

    trainer = L.Trainer(
        max_steps=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        accelerator="cpu",
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*no `val_dataloader`")
        trainer.fit(module, train_dataloaders=dm.train_dataloader())
    trainer.save_checkpoint(run_dir / "checkpoints" / "best.ckpt")
    RunDir.write_text(RunDir(run_dir).tokenizer, dm.tokenizer.to_json())


# Shared fixtures live here, not in a test module: a session fixture imported into another module is a second
# fixture there, computed again (test_damaged.py trained its own run_add).
@pytest.fixture(scope="session")
def run_add(tmp_path_factory) -> Path:
    """2-digit addition, 200 steps: right on most problems, wrong on some (~1.5 s)."""
    return make_run(tmp_path_factory.mktemp("run_add"), "+", 200)


@pytest.fixture(scope="session")
def run_mixed(tmp_path_factory) -> Path:
    """2-digit '+-*', one step: signed answers, mostly wrong or unreadable."""
    return make_run(tmp_path_factory.mktemp("run_mixed"), "+-*", 1)


def chromium_path() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)


@pytest.fixture(scope="module")
def browser():
    """The headless Chromium the pages are opened in (test_html_report.py's Page), one per module: Playwright's sync
    API marks an asyncio loop running in this thread while it lives, which a later test's own loop would trip on."""
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium installed (apt-get install chromium); .ci/run installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def untrained_calculator(n_layers: int = 2, seed: int = 0, n_test: int = 300):
    """An untrained 4-head, d_model 32 calculator on 2-digit addition and ``n_test`` held-out problems: (module in
    eval mode, test set). Shapes and bookkeeping, fast; what needs a model that learned trains one."""
    import lightning as L

    from data.arithmetic import DataConfig
    from data.build import data_module
    from training.load import calculator_module

    L.seed_everything(seed, verbose=False)
    dm = data_module(DataConfig(digits=2, n_val=10, n_test=n_test, val_fraction=0.05, test_fraction=0.05))
    model = dict(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len, d_model=32, n_heads=4, n_layers=n_layers)
    module = calculator_module(model=model, fmt=dm.fmt.to_dict(), optim={})
    return module.eval(), dm.held_out_set("test")


def kill_once_checkpointed(run_dir, *overrides: str, wait: float = 0.5) -> None:
    """Start ``python train.py`` into ``run_dir`` (a RunDir), SIGKILL it ``wait`` seconds after its first
    best.ckpt appears (or after 300 s), and wait for it to end: a run killed with no chance to say so."""
    import signal
    import time

    process = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={run_dir.path}", *overrides],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while not run_dir.best_checkpoint.exists() and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(wait)
    process.kill()  # SIGKILL
    process.wait()
    assert process.returncode == -signal.SIGKILL
