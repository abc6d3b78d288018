"""training/collector.py: what a command imports leaves the cycle collector's scans while it works, and everything is
back in them after, so a process that goes on frees what the work left."""

import gc
import weakref

import pytest

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
