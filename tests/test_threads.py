"""The project's thread count (training/threads.py) reaches every command that runs a model, threads= and
OMP_NUM_THREADS override it, a run slowed by other work says so once; long commands show progress in a terminal
and nothing when their output is not one (analysis/progress.py)."""

from __future__ import annotations

import io
import json
import sys
from types import SimpleNamespace

import pytest
import torch

import bench
from analysis.progress import stage, track
from tests.conftest import SMALL_TASK, compose_config, with_run_dir
from training import callbacks as run_callbacks
from training.assemble import assemble
from training.limits import machine_cores
from training.threads import DEFAULT_THREADS, slow_steps_note, use_threads, wanted_threads

CORES = machine_cores()


@pytest.fixture(autouse=True)
def torch_threads_kept(monkeypatch):
    """Each test sets torch's threads as a command would: the process's own count comes back after it."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    ("requested", "env", "expected"),
    [
        (None, None, DEFAULT_THREADS),  # the rule
        (None, "2", min(2, CORES)),  # OMP_NUM_THREADS, as torch itself would read it
        (None, "not a number", DEFAULT_THREADS),
        (None, "0", DEFAULT_THREADS),
        (2, "1", min(2, CORES)),  # threads= wins over the environment
        (1, None, 1),
        (10**6, None, CORES),  # never more than the cores
    ],
)
def test_the_thread_count_is_the_rule_unless_asked_otherwise(monkeypatch, requested, env, expected):
    if env is not None:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    assert wanted_threads(requested) == expected
    torch.set_num_threads(CORES)
    assert use_threads(requested) == expected == torch.get_num_threads()


@pytest.mark.parametrize(("overrides", "expected"), [([], DEFAULT_THREADS), ([f"threads={CORES}"], CORES)])
def test_a_run_computes_with_the_default_threads_or_its_threads_setting(tmp_path, overrides, expected):
    """train.py's objects (training/assemble.py, also the benchmark's): the rule's count, or threads= when given,
    whatever torch had before."""
    torch.set_num_threads(CORES if expected == DEFAULT_THREADS else 1)
    cfg = with_run_dir(compose_config([*SMALL_TASK, "logger=none", *overrides]), tmp_path)
    assemble(cfg)
    assert torch.get_num_threads() == expected


def test_bench_reports_the_thread_count_it_ran_with(capsys):
    torch.set_num_threads(CORES)
    assert bench.main(["decode", "--n", "20", "--repeat", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["threads"] == DEFAULT_THREADS == torch.get_num_threads()


COMMANDS = {  # each command's main(), given a run that is not there: it sets the threads first, then says so
    "calc.py": lambda missing: __import__("calc").main(["--ckpt", missing, "1+1"]),
    "analyse.py": lambda missing: __import__("analyse").main([missing]),
    "verify.py": lambda missing: __import__("verify").main([missing]),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("env", "expected"), [(None, DEFAULT_THREADS), (str(CORES), CORES)], ids=["rule", "omp"])
def test_every_command_computes_with_the_rule_s_threads(monkeypatch, tmp_path, capsys, command, env, expected):
    if env is not None:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    torch.set_num_threads(CORES if expected == DEFAULT_THREADS else 1)
    assert COMMANDS[command](str(tmp_path / "missing")) == 2
    assert torch.get_num_threads() == expected
    assert capsys.readouterr().err.startswith("error: ")


def test_slow_steps_are_said_once_with_what_to_do(monkeypatch, capsys):
    # full speed: nothing to say
    assert slow_steps_note(cpu_seconds=1.9, wall_seconds=1.0, threads=2, steps=40) is None
    assert slow_steps_note(cpu_seconds=0.6, wall_seconds=1.0, threads=1, steps=40) is None  # 2 busy on 2 cores
    many = slow_steps_note(cpu_seconds=0.5, wall_seconds=1.0, threads=2, steps=40)
    assert "25% of a core per thread" in many and "threads=1" in many and many.count("\n") == 0
    one = slow_steps_note(cpu_seconds=0.2, wall_seconds=1.0, threads=1, steps=40)
    assert "20% of a core" in one and "nothing in the run needs changing" in one

    # the callback: the process got no CPU time while the wall clock ran (the clocks made up), said once
    clock = iter(range(1000))
    monkeypatch.setattr(run_callbacks.time, "perf_counter", lambda: float(next(clock)))
    monkeypatch.setattr(run_callbacks.time, "process_time", lambda: 0.0)
    torch.set_num_threads(1)
    note = run_callbacks.SlowStepsNote(steps=3, skip=2)
    trainer = SimpleNamespace(progress_bar_callback=None, is_global_zero=True)
    module = SimpleNamespace(device=torch.device("cpu"))
    for step in range(20):
        note.on_train_batch_end(trainer, module, None, None, step)
    out = capsys.readouterr().err
    assert out.count("note: the first 3 steps got 0% of a core") == 1 and out.endswith("\n")


def test_the_run_has_the_slow_steps_note():
    cfg = compose_config([])
    assert cfg.callbacks.slow_steps._target_ == "training.callbacks.SlowStepsNote"


def nested_work() -> list[int]:
    done = []
    for analysis in track(["maps", "circuits"], "analysis", part=str):
        with stage(f"{analysis} parts", total=2) as progress:
            for part in range(2):
                progress.doing(f"part {part}")
                done.append(part)
                progress.advance()
    return done


def test_progress_is_silent_when_the_output_is_not_a_terminal(capsys):
    assert nested_work() == [0, 1, 0, 1]
    assert capsys.readouterr() == ("", "")


def test_progress_shows_the_stage_the_count_and_the_time_in_a_terminal(monkeypatch):
    err = io.StringIO()
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich draws as on a terminal
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setattr(sys, "stderr", err)
    assert nested_work() == [0, 1, 0, 1]
    shown = err.getvalue()
    assert "analysis" in shown and "2/2" in shown and "0:00:0" in shown  # what, how many of how many, elapsed


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_verify_shows_its_suites_in_a_terminal_and_nothing_in_a_pipe(monkeypatch, capsys, terminal):
    """A real hook (verify.py's suites, analysis/adderboard.py), with a calculator that is always right."""
    from analysis import adderboard
    from model.calculator import Answer

    class Truthful:
        def answer(self, problems):
            return [Answer(str(p.truth), p.truth) for p in problems]

    err = io.StringIO()
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
        monkeypatch.setattr(sys, "stderr", err)
    results = adderboard.verify(Truthful())
    assert all(r.passed for r in results)
    suites = len(results)
    if terminal:
        assert "verify" in err.getvalue() and f"{suites}/{suites}" in err.getvalue()
    else:
        assert capsys.readouterr() == ("", "") and err.getvalue() == ""
