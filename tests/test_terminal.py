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


def test_the_verbose_summary_prints_each_analysis_row_verbatim():
    """verbose=true: the researcher's view prints every analysis's row as recorded in results.json (each head's one
    sentence among them, analysis/metrics/head_story.py): nothing in it is read as rich markup, nothing is dropped."""
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
    print_summary(results, console, verbose=True)
    shown = console.export_text()
    assert all(text in shown for _, text in rows)


def many_heads_results(n_layers: int, n_heads: int) -> dict:
    """The results.json entries the summary reads, for a learned model of n_layers x n_heads heads: head LxhY
    costs (L * n_heads + Y) points when switched off."""
    names = [f"L{layer}h{head}" for layer in range(n_layers) for head in range(n_heads)]
    return {
        "data": {"digits": 3, "operators": "+", "reverse_answer": True},
        "n_layers": n_layers,
        "n_heads": n_heads,
        "head_dim": 64 // n_heads,
        "d_model": 64,
        "n_params": 102_080,
        "steps": 225,
        "train_seconds": 14.1,
        "tokens_per_second": 53_254,
        "test_exact_match": 1.0,
        "n_test": 10_000,
        "test_digit_accuracy": 1.0,
        "learned": True,
        "intact_exact_match": 1.0,
        "tolerance": 0.01,
        "prunable_fraction": 0.25,
        "head_roles": {
            name: "answer digit 10^k reads a and b digit 10^k-1 (the carry in)" if i % 2 else "current token"
            for i, name in enumerate(names)
        },
        "head_ablation": {name: {"zero": 1 - i / 100, "mean": 1.0} for i, name in enumerate(names)},
        "analysis_summary": [["activation patching", "L0h0 restores 76% of r0; attribution estimate r = 0.98"]],
        "images": {"attention": [], "ablation": "a/ablation.png", "dla": "a/dla.png", "patching": "a/patching.png"},
        "run_dir": "runs/2026-01-01/12-00-00",
    }


def test_the_summary_fits_a_100_column_terminal_in_the_courses_words_whatever_the_head_count():
    """The learner's summary: at most 30 lines of at most 100 characters also for 2 x 8 heads (the costliest 11
    and one line for the rest), each head's line saying where it attends and what switching it off costs, in the
    lessons' words: no logits, attribution or patching."""
    from analysis.summary import summary_lines

    for n_layers, n_heads in ((2, 4), (2, 8), (4, 16)):
        lines = summary_lines(many_heads_results(n_layers, n_heads))
        assert len(lines) <= 30 - 6 and max(map(len, lines)) <= 100, lines  # 6: the closing and next: lines
        text = "\n".join(lines).lower()
        assert not any(word in text for word in ("logit", "attribution", "patching")), text
    lines = summary_lines(many_heads_results(2, 4))
    heads = [line for line in lines if line[:1] == "L"]
    assert heads[0].startswith("L0h0      its own token; ") and heads[0].endswith("off: 100% right (±0 pts)")
    assert len({line.index(" off: ") for line in heads}) == 1  # the costs in one column
    assert heads[1].startswith("L0h1      both operands' digits one place lower (the carry in); ")
    assert heads[1].endswith(" off: 99% right (-1 pts)")
    assert any(line.startswith("model     2 layers × 4 heads × head_dim 16 (d_model 64") for line in lines)
    assert any(line.startswith("pruning   2 of 8 heads can be removed together") for line in lines)
    assert "images    runs/2026-01-01/12-00-00/attention/, ablation.png (all of them: report.html)" in lines
    many = summary_lines(many_heads_results(4, 16))
    assert sum(line[:1] == "L" for line in many) == 11 and "L3h15" in "\n".join(many)  # the costliest kept
    assert any("the other 53 heads cost less" in line for line in many)


def test_verbose_true_prints_the_researchers_table_at_the_end_of_a_real_run(tmp_path):
    """python train.py verbose=true: the table with every analysis's rows (direct effects, patching, each head's
    reconciled story), as results.json records them, then the same closing lines."""
    import json

    from tests.conftest import SHORT_RUN, run_train

    done = run_train(tmp_path, *SHORT_RUN, "trainer.max_steps=100", "verbose=true")
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    table = done.stdout[done.stdout.index("tinycalc run") :]
    assert "┌" in table and "test exact-match" in table
    assert all(label in table for label, _ in results["analysis_summary"] if label)
    assert f"run directory: {tmp_path}" in done.stdout


def test_analyse_wraps_each_row_to_the_terminal(run_add, tmp_path, monkeypatch, capsys):
    """python analyse.py in a 100-column terminal: each analysis row (a head's story runs to 500 characters) is
    wrapped under its label, nothing lost."""
    import shutil

    import analyse
    from analysis.pipeline import HeadAnalysis

    run = tmp_path / "run"
    shutil.copytree(run_add, run)
    (run / "results.json").write_text('{"status": "ok"}')
    story = "L0h0 attends mostly to its own token, yet zeroing it costs 23.3 points; " * 7
    rows = [["each head", story.strip()], ["", "L0h1 attends mostly to its own token"]]
    monkeypatch.setattr(HeadAnalysis, "run", lambda *a: {"analysis_summary": rows, "analysis_seconds": 0.0})
    monkeypatch.setenv("COLUMNS", "100")
    assert analyse.main([str(run), "--no-circuits"]) == 0
    shown = capsys.readouterr().out.splitlines()[:-1]  # the last line names the page's path
    assert len(shown) > 5 and max(map(len, shown)) <= 100, shown
    assert shown[0].startswith(f"{'each head':>24}  L0h0") and all(line.startswith(" " * 26) for line in shown[1:-1])
    assert " ".join(line.strip() for line in shown[:-1]).removeprefix("each head").strip() == story.strip()


def test_wandb_says_nothing_in_the_terminal_and_leaves_the_environment_as_it_was(tmp_path):
    """The run's wandb logger is built silent (wandb.setup, before anything of wandb starts): no banner, no summary
    lines, no WANDB_SILENT set for the rest of the process; WANDB_SILENT=false asks for wandb's lines back."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import os\n"
        "from tests.conftest import compose_config, with_run_dir\n"
        "from training.loggers import build_loggers\n"
        f"cfg = with_run_dir(compose_config(['logger=wandb', 'logger.wandb.mode=offline']), {str(tmp_path)!r})\n"
        "[logger] = build_loggers(cfg, 'quiet', None, None)\n"
        "logger.log_metrics({'a': 1.0}, step=0)\n"
        "logger.experiment.finish()\n"
        "print('WANDB_SILENT' in os.environ)\n"
    )
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SILENT"}
    for silent in (None, "false"):
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120,
            env=env if silent is None else {**env, "WANDB_SILENT": silent},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        said = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("wandb:")]
        if silent is None:
            assert said == [] and done.stdout.split()[-1] == "False"  # nothing said, nothing set
        else:
            assert any(line.startswith("wandb: Tracking run with wandb") for line in said), said


def test_a_sweep_logged_to_wandb_prints_no_wandb_lines(tmp_path):
    """Each job's wandb run and the sweep's own summary run (with the jobs' logger settings) are built silent alike,
    and what the runs log (the attention maps' JSON among it) warns of nothing: a sweep's terminal holds the project's
    lines only (the summary run's banner once reached the docs' measured blocks; wandb.save's "Symlinked 1 file" the
    default run's terminal)."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import SMALL_TASK

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "train.py"), "-m", *SMALL_TASK, "model.n_heads=1,2", "trainer.max_steps=75",
         "trainer.val_check_interval=25",
         "logger=wandb", "logger.wandb.project=tinycalc-tests",  # its mode: ${oc.env:WANDB_MODE,offline}
         f"hydra.sweep.dir={tmp_path}"],
        cwd=root, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "wandb").is_dir() and (tmp_path / "sweep_report.html").is_file(), done.stderr[-2000:]
    from tests import wandb_record

    (summary_run,) = (tmp_path / "wandb").glob("offline-run-*")  # in the jobs' project, as their logger says
    (begun,) = wandb_record.of_kind(summary_run, "run")
    assert (begun.project, begun.job_type, begun.run_group) == ("tinycalc-tests", "summary", tmp_path.name)
    assert "wandb:" not in done.stdout + done.stderr, done.stdout + done.stderr
    kept = list(tmp_path.glob("*/wandb/offline-run-*/files/attention/*.json"))  # maps every 3rd validation
    assert kept, "the attention maps' JSON did not reach the job's wandb run"


def test_the_summary_counts_in_words_and_says_what_its_symbols_mean():
    """The model row says "1 layer × 1 head", not "1 heads"; where a head's role holds ~ or ^ (the start token), a
    line says what each means, as the report's roles do; a role without them gets no such line."""
    from analysis.summary import summary_lines

    results = many_heads_results(1, 1)
    assert "1 layer × 1 head × head_dim 64" in "\n".join(summary_lines(results))
    assert "4 heads" in "\n".join(summary_lines(many_heads_results(2, 4)))
    results["head_roles"] = {"L0h0": "by place: r0<-^ r1<-a0+b0 r2<-~"}
    lines = summary_lines(results)
    assert any("~ = spread out" in line and "^ = the start token ([BOS])" in line for line in lines), lines
    results["head_roles"] = {"L0h0": "answer digit 10^k reads a and b digit 10^k"}  # a power of ten: no key
    assert not any("~ =" in line or "^ =" in line for line in summary_lines(results))
