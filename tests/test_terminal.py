"""What a newcomer reads in the terminal: the progress bar's step count, and no noise on a resumed run."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

from training.callbacks import StepsColumn
from training.loggers import quiet_known_noise


def trainer(step: int, max_steps: int, fn: str = "fit", threshold: float | None = 0.999):
    return SimpleNamespace(
        global_step=step,
        max_steps=max_steps,
        state=SimpleNamespace(fn=fn),
        early_stopping_callback=SimpleNamespace(stopping_threshold=threshold),
    )


def task(description: str, completed: int, total: float | None):
    return SimpleNamespace(description=description, completed=completed, total=total)


def test_the_bar_counts_the_runs_steps_out_of_max_steps_also_after_a_resume():
    # resumed at step 24: Lightning's task counts this process's 201 batches out of the 1,776 left
    column = StepsColumn(trainer(step=225, max_steps=1800))
    assert column.render(task("training", 201, 1776)).plain == "225/≤1,800"
    assert StepsColumn(trainer(225, 1800, threshold=None)).render(task("training", 201, 1776)).plain == "225/1,800"
    # validation's own bar counts its batches
    assert column.render(task("validation", 1, 1)).plain == "1/1"
    assert StepsColumn(trainer(0, 1800, fn="test")).render(task("testing", 3, None)).plain == "3"


def test_a_resumed_run_is_not_warned_that_its_own_checkpoints_are_there():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        quiet_known_noise()
        warnings.warn("Checkpoint directory /x/checkpoints exists and is not empty.", UserWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something else"]


def test_the_summary_prints_each_analysis_row_verbatim():
    """The end-of-run summary prints every analysis's row as recorded in results.json (each head's one sentence
    among them, analysis/metrics/head_story.py): nothing in it is read as rich markup, nothing is dropped."""
    import io

    from rich.console import Console

    from analysis.summary import print_summary

    rows = [
        ["each head", "L0h0 attends mostly to [BOS], yet zeroing it costs 30.0 points; [bold]not markup[/bold]"],
        ["", "L0h1 attends mostly to its own token, and removing it costs at most 1 point"],
    ]
    results = {
        "data": {"digits": 3, "operators": "+", "reverse_answer": True},
        "n_layers": 1,
        "n_heads": 2,
        "head_dim": 32,
        "n_params": 1000,
        "steps": 10,
        "train_seconds": 1.0,
        "tokens_per_second": 100,
        "test_exact_match": 1.0,
        "n_test": 10,
        "test_digit_accuracy": 1.0,
        "analysis_summary": rows,
        "run_dir": "runs/x",
    }
    console = Console(width=100_000, file=io.StringIO(), record=True)
    print_summary(results, console)
    shown = console.export_text()
    assert all(text in shown for _, text in rows)
