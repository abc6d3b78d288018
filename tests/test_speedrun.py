"""experiment=add10_speedrun end to end: from nothing to an adder verify.py passes, stopped by its validation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, run_train


@pytest.mark.slow
def test_add10_speedrun_trains_an_adder_that_verify_passes(tmp_path):
    done = run_train(tmp_path, "experiment=add10_speedrun", "seed=0", "logger=none")
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["steps"] < 1500  # stopped when done (275 steps measured), not at the ceiling
    assert results["test_exact_match"] >= 0.999 and results["phases"]["analysis"] < 1
    verdict = subprocess.run(
        [sys.executable, str(ROOT / "verify.py"), str(tmp_path), "--json"], cwd=ROOT, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert verdict.returncode == 0, verdict.stdout[-2000:] + verdict.stderr[-2000:]
    suites = json.loads(verdict.stdout)[str(tmp_path)]["suites"]
    assert suites["random pairs"]["right"] >= 9_900 and all(s["passed"] for s in suites.values())


def test_the_phases_benchmark_gives_each_phase_its_share_of_the_whole_command():
    from rich.console import Console

    import bench
    from benchmarks.phases import PHASES, RUNS, summarise

    assert "phases" in bench.SECTIONS and RUNS["add10_speedrun"] == ["experiment=add10_speedrun"]
    runs = [
        {"startup": 1.0, "build": 2.0, "training": 6.0, "test": 0.5, "analysis": 0.0, "report": 0.5, "total": 10.0},
        {"startup": 3.0, "build": 2.0, "training": 8.0, "test": 0.5, "analysis": 0.0, "report": 0.5, "total": 14.0},
    ]
    s = summarise(runs, walls=[11.0, 15.0], steps=[200, 225])
    assert s["seconds"]["startup"] == 2.0 and s["seconds"]["training"] == 7.0  # medians, phase by phase
    assert s["whole_seconds"] == 13.0 and s["seconds"]["outside"] == 1.0  # the interpreter's start and exit
    assert set(s["share"]) == {*PHASES, "outside"} and abs(sum(s["share"].values()) - 1) < 1e-3
    console = Console(record=True, width=200)
    bench.print_phases({"runs": {"add10_speedrun": {"command": "python train.py experiment=add10_speedrun"} | s},
                        "rounds": 2, "errors": {"default": "train.py exit status 1: boom"}}, console)  # fmt: skip
    text = console.export_text()
    assert "7.0 (54%)" in text and "13.0" in text and "200, 225" in text and "failed: default" in text


def test_the_phases_benchmark_puts_the_default_beside_the_previous_recipe_and_prices_each_cut():
    from rich.console import Console

    import bench
    from benchmarks.phases import CUTS, PREVIOUS_RECIPE, RUNS, cuts_bought, summarise

    ladder = [name for name in RUNS if name != "add10_speedrun"]
    assert ladder[0] == "without the cuts" and RUNS["without the cuts"] == list(PREVIOUS_RECIPE)
    assert ladder[-1] == "default" and RUNS["default"] == [] and len(ladder) == len(CUTS) + 1
    for before, after in zip(
        ladder[:-1], ladder[1:], strict=True
    ):  # each rung undoes one cut fewer than the one before it
        assert set(RUNS[after]) < set(RUNS[before])
    one = {"startup": 1.0, "build": 1.0, "training": 5.0, "test": 0.5, "analysis": 1.0, "report": 0.1}
    runs = {name: {"command": " ".join(["python train.py", *RUNS[name]])}
            | summarise([one | {"training": 5.0 - i}], walls=[12.0 - 2 * i], steps=[200])
            for i, name in enumerate(ladder)}  # fmt: skip
    bought = cuts_bought(runs)
    assert [c["cut"] for c in bought] == [name for name, _ in CUTS]
    assert all(c["whole_seconds_saved"] == 2.0 and c["training_seconds_saved"] == 1.0 for c in bought)
    assert cuts_bought({})[0]["whole_seconds_saved"] is None  # a rung that failed: nothing to subtract
    console = Console(record=True, width=200)
    bench.print_phases({"runs": runs, "cuts": bought, "rounds": 1, "errors": {}}, console)
    text = console.export_text()
    assert "what each cut bought" in text and CUTS[0][0] in text and "without the cuts" in text


def test_every_rung_of_the_phases_ladder_is_a_command_train_py_takes():
    from benchmarks.phases import RUNS
    from training.cli import check_command_line

    for args in RUNS.values():  # a typo in an undo override would fail every run of that rung, minutes in
        assert check_command_line(list(args)) is None
