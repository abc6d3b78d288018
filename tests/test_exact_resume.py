"""A run interrupted at any step and resumed ends exactly like the same run uninterrupted: the same results.json
metrics and the same history.json, for every option that draws randomness (issue 40, class 4).

The interruption is a real Ctrl-C (SIGINT) that train.py sends itself while it trains a chosen step
(tests/stop_at.py); the run's own machinery (GracefulStop, Run) saves and records it, and ``resume=`` continues it.
What a run draws from: its streamed batches and hard cases (a pure function of seed and step), a fixed training
set's shuffle (seed and epoch), and each step's dropout and moved places (seeded from seed and step).
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHORT_RUN, run_train

STEPS = 60  # validation every 20: steps 20, 40 and 60 validate
BASE = [*SHORT_RUN, "analysis=none", "threads=1", f"trainer.max_steps={STEPS}", "target_accuracy=null"]
BASE += ["trainer.val_check_interval=20", "callbacks.attention_maps=null"]
METRICS = ("test_exact_match", "test_loss", "test_digit_accuracy", "val_exact_match", "steps")
FIXED_SET = ["data.streaming=false", "data.n_train=1500"]  # 11 batches of 128: step 20 in epoch 2
OPTIONS = {  # every option that draws randomness, each on its own
    "default": [],
    "dropout": ["model.dropout=0.1"],
    "shifted places": ["position=coupling", "model.place_offset=2"],
    "random places": ["position=coupling", "model.place_offset=2", "model.random_places=0.5"],
    "streaming off": FIXED_SET,
    "hard cases": ["data.hard_share=0.5", "data.hard_fade_steps=40"],
    "mixed widths": ["data.mixed_widths=true"],
    "mixed lengths": ["data.mixed_lengths=0.5", "data.round_numbers=0.25"],
}
ALL_AT_ONCE = ["model.dropout=0.1", "position=coupling", "model.place_offset=2", "model.random_places=0.5", *FIXED_SET]


def interrupted_at(step: int, run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    """train.py with a Ctrl-C while it trains ``step`` (tests/stop_at.py)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "stop_at.py"), str(step), f"hydra.run.dir={run_dir}", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def record(run_dir: Path) -> tuple[dict, list]:
    results = json.loads((run_dir / "results.json").read_text())
    return {k: results[k] for k in METRICS}, json.loads((run_dir / "history.json").read_text())["val"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The uninterrupted run of each option, trained once per module: {option name: (metrics, history)}."""
    runs: dict[str, tuple[dict, list]] = {}

    def run(name: str, overrides: list[str]) -> tuple[dict, list]:
        if name not in runs:
            run_dir = tmp_path_factory.mktemp("whole") / "run"
            done = run_train(run_dir, *BASE, *overrides)
            assert done.returncode == 0, done.stderr[-2000:]
            runs[name] = record(run_dir)
        return runs[name]

    return run


def interrupt_and_resume(tmp_path: Path, step: int, overrides: list[str], move: bool = False) -> Path:
    run_dir = tmp_path / "run"
    stopped = interrupted_at(step, run_dir, *BASE, *overrides)
    assert stopped.returncode == 128 + signal.SIGINT, stopped.stderr[-2000:]
    state = json.loads((run_dir / "results.json").read_text())
    assert state["status"] == "interrupted" and state["step"] == step, state
    if move:  # the run directory moved (or copied) before it is resumed: it resumes against itself
        run_dir = shutil.move(run_dir, tmp_path / "moved")
    done = run_train(run_dir, f"resume={run_dir}")
    assert done.returncode == 0, done.stderr[-2000:]
    return Path(run_dir)


def test_a_run_of_every_random_option_interrupted_at_a_validated_step_mid_epoch_and_moved_resumes_exactly(
    tmp_path, uninterrupted
):
    """The fast representative: dropout, random places and a fixed set's shuffle at once, 30 steps stopped at step
    20 (a validation step, in the second epoch of the fixed set), the directory moved before it is resumed."""
    short = [*ALL_AT_ONCE, "trainer.max_steps=30", "trainer.val_check_interval=10"]
    whole = uninterrupted("all at once", short)
    run_dir = interrupt_and_resume(tmp_path, 20, short, move=True)
    assert record(run_dir) == whole
    results = json.loads((run_dir / "results.json").read_text())
    assert results["checkpoint"] == str(run_dir / "checkpoints" / "best.ckpt")  # its own best weights, not the old
    assert not (run_dir / "checkpoints" / "interrupted.ckpt").exists()  # used up


@pytest.mark.slow  # three trainings of ~5 s a row
@pytest.mark.parametrize("option", list(OPTIONS))
def test_interrupted_at_a_random_step_and_resumed_equals_not_interrupted(tmp_path, uninterrupted, option):
    step = random.Random(option).randrange(1, STEPS + 1)  # a step chosen at random, the same one each time
    assert record(interrupt_and_resume(tmp_path, step, OPTIONS[option])) == uninterrupted(option, OPTIONS[option])


@pytest.mark.slow  # three trainings of ~5 s a row
@pytest.mark.parametrize("experiment", sorted(p.stem for p in (ROOT / "configs" / "experiment").glob("*.yaml")))
def test_a_run_of_every_experiment_interrupted_and_resumed_equals_not_interrupted(tmp_path, uninterrupted, experiment):
    """Each experiment's own recipe and format (hard cases, mixed lengths and widths, places, working), on the
    small task."""
    overrides = [f"experiment={experiment}"]  # the command line's steps and sizes (BASE) still hold
    step = random.Random(experiment).randrange(1, STEPS + 1)
    assert record(interrupt_and_resume(tmp_path, step, overrides)) == uninterrupted(experiment, overrides)


@pytest.mark.slow
@pytest.mark.parametrize("step", [1, 40, STEPS])  # the first step, a validated one, exactly max_steps
def test_interrupted_at_the_edges_and_resumed_equals_not_interrupted(tmp_path, uninterrupted, step):
    whole = uninterrupted("dropout", OPTIONS["dropout"])
    resumed = record(interrupt_and_resume(tmp_path, step, OPTIONS["dropout"]))
    assert resumed == whole  # history.json whole: interrupted at max_steps, the last validation is kept


def test_the_stop_ends_the_training_at_its_step_and_a_run_early_stopping_ended_stays_ended(tmp_path, monkeypatch):
    """Ctrl-C ends the training as max_steps would at that step (should_stop would validate once more), saves after
    the step's validation, and a run whose training early stopping ended at that same step trains no further."""
    from types import SimpleNamespace

    from training import callbacks

    saved = []
    monkeypatch.setattr(callbacks, "save_checkpoint", lambda trainer, path: saved.append(path))
    stop = callbacks.GracefulStop(tmp_path)
    loop = SimpleNamespace(max_steps=STEPS)
    fit_loop = SimpleNamespace(epoch_loop=loop)
    trainer = SimpleNamespace(global_step=40, should_stop=False, fit_loop=fit_loop, world_size=1)
    stop._training = True
    stop._request(signal.SIGINT, None)
    stop.on_train_batch_end(trainer, None, None, None, 0)
    assert loop.max_steps == 40 and not trainer.should_stop and saved == []  # the step's validation is still to come
    trainer.should_stop = True  # early stopping, at that validation
    stop.on_train_end(trainer, None)
    assert saved == [stop.path] and stop.saved == stop.path and stop.state_dict() == {"ended": True}

    resumed, started = callbacks.GracefulStop(tmp_path), SimpleNamespace(should_stop=False)
    resumed.load_state_dict(stop.state_dict())
    resumed.on_train_start(started, None)
    assert started.should_stop  # the resumed run's training is over before it begins, as the run's was
    callbacks.GracefulStop(tmp_path).on_train_start(started := SimpleNamespace(should_stop=False), None)
    assert not started.should_stop
