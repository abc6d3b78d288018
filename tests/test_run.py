"""The run's life as one object (training/run.py: Run): the status it records phase by phase, what the record holds,
the resumed run's used-up checkpoint, and the seconds it counts -- without training anything."""

from __future__ import annotations

import json
import signal
from types import SimpleNamespace

import pytest
import torch

from storage.rundir import RunDir
from training.failures import Interrupted
from training.run import Run, next_steps
from training.signals import Signalled


class Tokenizer:
    def to_json(self) -> str:
        return "{}"


def begun(tmp_path, resume=None, **cfg) -> Run:
    """A Run past its build phase: the directory claimed, "running" recorded."""
    from omegaconf import OmegaConf

    run_dir = RunDir(tmp_path / "run")
    life = Run(OmegaConf.create({"resume": resume, "seed": 0, **cfg}), run_dir, process_started=0.0)
    trainer = SimpleNamespace(is_global_zero=True, loggers=[], global_step=7)
    life.begin(trainer, callbacks=[], loggers=[], tokenizer=Tokenizer())
    return life


def test_a_run_says_running_from_its_first_write_then_ok_with_its_phases(tmp_path):
    life = begun(tmp_path)
    assert life.dir.read_results()["status"] == "running" and life.dir.config.is_file() and life.dir.tokenizer.is_file()
    with life.phase("training"):
        pass
    with life.phase("test"):
        life.results = {"status": "ok", "test_exact_match": 1.0}
    assert life.dir.read_results()["status"] == "running"  # tested is not yet recorded
    with life.phase("analysis"):
        life.results["total_seconds"] = life.seconds
    recorded = life.dir.read_results()
    assert recorded["status"] == "ok" and set(recorded["phases"]) >= {
        "startup",
        "build",
        "training",
        "test",
        "analysis",
    }
    with life.phase("report"):
        pass
    assert "report" in life.dir.read_results()["phases"]


def test_a_resumed_run_uses_up_its_interrupted_checkpoint_once_it_is_recorded(tmp_path):
    life = begun(tmp_path, resume=str(tmp_path / "run"))
    life.dir.interrupted_checkpoint.parent.mkdir(parents=True, exist_ok=True)
    torch.save({}, life.dir.interrupted_checkpoint)
    life.results = {"status": "ok"}
    with life.phase("analysis"):
        pass
    assert life.dir.interrupted_checkpoint.is_file()  # recorded, not yet finished: the page is still to come
    with life.phase("report"):
        life.finished()
    assert not life.dir.interrupted_checkpoint.exists()


@pytest.mark.parametrize("phase", ["analysis", "report"])
def test_a_signal_after_the_test_leaves_the_run_ok(tmp_path, phase):
    life = begun(tmp_path)
    life.results = {"status": "ok", "test_exact_match": 0.5}
    with pytest.raises(Interrupted) as stopped:
        with life.phase(phase):
            raise Signalled(signal.SIGTERM)
    assert stopped.value.signum == signal.SIGTERM and "the run is finished" in str(stopped.value)
    recorded = life.dir.read_results()
    assert recorded["status"] == "ok" and recorded["interrupted_phase"] == phase and recorded["test_exact_match"] == 0.5


def test_only_a_processes_first_run_counts_the_startup(tmp_path, monkeypatch):
    monkeypatch.setattr(Run, "runs_in_process", 0)
    first = Run(SimpleNamespace(resume=None), RunDir(tmp_path / "a"), process_started=0.0)
    later = Run(SimpleNamespace(resume=None), RunDir(tmp_path / "b"), process_started=0.0)
    assert first.phases.laps["startup"] > 0 and later.phases.laps["startup"] == 0


def test_train_seconds_stop_with_the_training_and_add_the_interrupted_runs(tmp_path):
    life = begun(tmp_path)
    life.previous = {"train_seconds": 100.0}
    with life.phase("training"):
        pass
    seconds = life.train_seconds
    assert seconds >= 100.0 and life.train_seconds == seconds  # frozen once training ended


def test_next_steps_name_the_page_and_calc_py():
    lines = next_steps({"run_dir": "runs/x", "data": {"digits": 3, "operators": "+"}})
    assert "runs/x/report.html" in lines and "calc.py --ckpt runs/x 111+22" in lines and "--eval" in lines


def test_next_steps_ask_a_short_b_of_a_run_that_drew_one():
    lines = next_steps({"run_dir": "r", "data": {"digits": 9, "operators": "*", "b_digits": 1}})
    assert "calc.py --ckpt r 111111111*2\n" in lines + "\n" and "--eval" not in lines


def resumable(tmp_path, step: int = 30) -> RunDir:
    """An interrupted run's directory: its checkpoint and its record."""
    run_dir = RunDir(tmp_path / "run")
    run_dir.interrupted_checkpoint.parent.mkdir(parents=True)
    run_dir.interrupted_checkpoint.write_bytes(b"the state the run continues from")
    record = {"status": "interrupted", "step": step, "train_seconds": 2.5, "resume": "python train.py resume=run"}
    run_dir.results.write_text(json.dumps(record))
    return run_dir


@pytest.mark.parametrize("steps_trained", [0, 5])
def test_a_resumed_run_stopped_at_once_before_it_trained_leaves_the_run_as_it_was(tmp_path, steps_trained):
    run_dir = resumable(tmp_path)
    before = run_dir.results.read_bytes()
    life = begun(tmp_path, resume=str(run_dir.interrupted_checkpoint))
    assert life.dir.status == "running"
    life.trainer.global_step = 30 + steps_trained  # where the checkpoint took it, and the steps trained since
    with pytest.raises(Interrupted) as stopped:
        with life.phase("training"):
            raise Signalled(signal.SIGINT)
    if steps_trained:  # it trained: the record says where it got to, and what continues it
        state = run_dir.read_results()
        assert state["status"] == "interrupted" and state["step"] == 35 and "continue from" in str(stopped.value)
        assert state["checkpoint"] == str(run_dir.interrupted_checkpoint)
    else:
        assert run_dir.results.read_bytes() == before and "the run is as it was" in str(stopped.value)


@pytest.mark.parametrize("begun_first", [False, True])
def test_a_signal_before_a_resumed_runs_phases_leaves_the_run_as_it_was(tmp_path, capsys, begun_first):
    from training.run import run_job

    run_dir = resumable(tmp_path)
    before = run_dir.results.read_bytes()

    def job():
        if begun_first:  # "running" written over the interrupted record, then Ctrl-C
            Run(SimpleNamespace(resume=str(run_dir.interrupted_checkpoint)), run_dir).dir.mark_running(
                str(run_dir.interrupted_checkpoint), run_dir.read_results()
            )
        raise Signalled(signal.SIGINT)

    with pytest.raises(SystemExit) as ended:
        run_job(job, run_dir, in_sweep=False, resuming=True)
    err = capsys.readouterr().err
    assert ended.value.code == 130 and "the run is as it was" in err and "nothing to resume" not in err
    assert run_dir.results.read_bytes() == before and run_dir.interrupted_checkpoint.is_file()


def test_a_resumed_run_that_fails_puts_back_its_record_and_a_new_one_is_failed(tmp_path, capsys):
    from training.config import ConfigError
    from training.run import run_job

    run_dir = resumable(tmp_path)
    before = run_dir.results.read_bytes()

    def job():
        run_dir.claim(resuming=True)
        run_dir.mark_running(str(run_dir.interrupted_checkpoint), run_dir.read_results())
        raise ConfigError("wandb rejected the run's tags")  # nothing to do with the run

    with pytest.raises(SystemExit):
        run_job(job, run_dir, in_sweep=False, resuming=True)
    assert run_dir.results.read_bytes() == before and "error: wandb rejected" in capsys.readouterr().err
