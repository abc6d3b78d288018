"""training/collector.py: what a command imports leaves the cycle collector's scans while it works, and everything is
back in them after, so a process that goes on frees what the work left -- and does not grow, call after call."""

import gc
import shutil
import weakref
from pathlib import Path

import pytest

from training import collector
from training.collector import alive_frozen, freeze_alive


class Node:  # a cycle only the collector frees: a Node that holds itself
    def __init__(self):
        self.me = self


@pytest.fixture(autouse=True)
def nothing_frozen():
    gc.unfreeze()  # whatever an earlier test in this process left
    yield
    gc.unfreeze()


def test_what_is_alive_as_the_work_begins_is_frozen_while_it_runs_and_back_after():
    before = Node()
    with alive_frozen():
        assert gc.get_freeze_count() > 0
        assert not any(o is before for o in gc.get_objects())  # in no generation the collector scans
    assert gc.get_freeze_count() == 0
    assert any(o is before for o in gc.get_objects(2))


def test_the_works_own_cycles_are_still_collected_while_it_runs():
    with alive_frozen():
        made = weakref.ref(Node())
        gc.collect()
        assert made() is None


def test_a_frozen_cycle_the_work_let_go_is_freed_once_the_work_is_over():
    """Frozen, it survives every collection; unfrozen after the work, the next one frees it: no leak in a process
    that goes on (a sweep's next run, a test suite)."""
    held = [Node()]
    left = weakref.ref(held[0])
    with alive_frozen():
        held.clear()
        gc.collect()
        assert left() is not None  # frozen: the collector does not look at it
    gc.collect()
    assert left() is None


def test_what_the_work_built_and_froze_is_back_in_the_scans_after_too():
    with alive_frozen():
        built = weakref.ref(Node())
        freeze_alive()  # as training/run.py's Run.begin does once the build is done
        gc.collect()
        assert built() is not None
    gc.collect()
    assert built() is None


def test_what_an_earlier_work_left_is_freed_before_the_next_work_freezes(monkeypatch):
    """A process that goes on (a notebook's loop, a sweep's next job): the cycles the last work left, back in the
    oldest generation, are collected as the next work begins -- frozen with what is alive, they would wait out that
    work too, and the next, and the process would grow by them each call."""
    monkeypatch.setattr(collector, "_worked", False)
    with alive_frozen():
        held = [Node()]
    left = weakref.ref(held.pop())
    with alive_frozen():
        assert left() is None  # freed, not frozen


def test_a_process_s_first_work_pays_no_collection(monkeypatch):
    """A command's one work: nothing earlier left anything, so it freezes at once, with no full collection first
    (over a command's imports it costs 0.05-0.15 s)."""
    monkeypatch.setattr(collector, "_worked", False)
    collections = []
    monkeypatch.setattr(gc, "collect", lambda *a: collections.append(a) or 0)
    with alive_frozen():
        assert collections == []
    with alive_frozen():
        assert len(collections) == 1


def test_the_scans_are_back_when_the_work_fails():
    with pytest.raises(RuntimeError), alive_frozen():
        raise RuntimeError("the work failed")
    assert gc.get_freeze_count() == 0


def test_analyse_freezes_while_it_analyses_and_leaves_nothing_frozen_after(run_add, tmp_path, monkeypatch):
    """analyse.py's main, called in-process as tests and notebooks do: its imports are frozen while the analyses run,
    and every object is back in the scans once it returns (only the command line's exit_quickly freezes for good)."""
    import shutil

    import analyse
    from analysis.pipeline import HeadAnalysis

    run = tmp_path / "run"
    shutil.copytree(run_add, run)
    (run / "results.json").write_text('{"status": "ok"}')
    frozen_during = []

    def analysed(self, module, test_set, run_dir):
        frozen_during.append(gc.get_freeze_count())
        return {"analysis_summary": [], "analysis_seconds": 0.0}

    monkeypatch.setattr(HeadAnalysis, "run", analysed)
    assert analyse.main([str(run), "--no-circuits"]) == 0
    assert frozen_during and frozen_during[0] > 10_000  # torch's objects, at least
    assert gc.get_freeze_count() == 0


def analysed_run(run_add, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_add, run)
    (run / "results.json").write_text('{"status": "ok"}')
    return run


def test_analyse_called_again_and_again_in_one_process_does_not_grow(run_add, tmp_path, capsys):
    """A notebook's loop of analyse.main (the real analyses, circuits off): the objects alive after each call are
    those after the second, not ~47,000 more each call as when each call froze the last one's garbage."""
    import analyse

    run = analysed_run(run_add, tmp_path)
    alive = []
    for _ in range(6):
        assert analyse.main([str(run), "--no-circuits", "--problems", "100"]) == 0
        alive.append(len(gc.get_objects()))
    capsys.readouterr()
    assert max(alive[1:]) - min(alive[1:]) < 0.01 * alive[1], alive


def rss_mb() -> float:
    """This process's resident memory, MB, after glibc hands its free pages back (Linux)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_twenty_trainings_and_twenty_analyses_in_one_process_stay_within_10_percent(run_add, tmp_path, capsys):
    """20 trainings (train.py's job through run_job, as train.py and a sweep's every job run it) and 20 analyse.main
    calls in one process: memory within 10% of the second call's, and the objects alive as many as after it."""
    import time

    from omegaconf import open_dict

    import analyse
    import train
    from storage.rundir import RunDir
    from tests.conftest import SHORT_RUN, compose_config, with_run_dir
    from training.resume import effective_config
    from training.run import Run, run_job

    def training(i: int) -> None:
        path = tmp_path / f"train{i}"
        overrides = [*SHORT_RUN, "trainer.max_steps=20", "analysis=none"]
        cfg = with_run_dir(compose_config([f"hydra.run.dir={path}", *overrides]), path)
        cfg, run_dir = effective_config(cfg, overrides, False), RunDir(path)
        with open_dict(cfg):
            cfg.pop("hydra")  # as @hydra.main hands train.py's main its config: without Hydra's own node

        def job() -> dict:
            return train.train(cfg, Run(cfg, run_dir, time.perf_counter()), path.name, None)

        assert run_job(job, run_dir, in_sweep=False)["status"] == "ok"
        shutil.rmtree(path)

    run = analysed_run(run_add, tmp_path)
    for call in (training, lambda i: analyse.main([str(run), "--no-circuits", "--problems", "100"])):
        memory, alive = [], []
        for i in range(20):
            call(i)
            capsys.readouterr()
            memory.append(rss_mb())
            alive.append(len(gc.get_objects()))
        assert max(memory[1:]) <= 1.1 * memory[1], memory
        assert max(alive[1:]) - min(alive[1:]) < 0.01 * alive[1], alive
