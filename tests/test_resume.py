"""Every interrupted run can be continued (issue 40, class 2), and no record is overwritten with "failed" while
the run it describes can still be continued (class 3): resume= of every experiment, the resume command as printed
(through a shell), a record kept as it was when a resume fails or is stopped before it trained."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from storage.rundir import RunDir, hydra_override, override
from tests.conftest import CONFIGS, ROOT, SHORT_RUN, compose_config, with_run_dir
from training.assemble import assemble
from training.config import ConfigError
from training.resume import effective_config

EXPERIMENTS = sorted(p.stem for p in (CONFIGS / "experiment").glob("*.yaml"))
INTERRUPTED = {"status": "interrupted", "interrupted_phase": "training", "step": 30, "train_seconds": 1.5}


def interrupted_run(run: Path, *overrides: str, record: dict | None = None) -> Path:
    """A run directory as an interrupted run leaves it, made without training: config.yaml, .hydra/hydra.yaml with
    the groups chosen, checkpoints/interrupted.ckpt of the (untrained) model, results.json."""
    cfg = with_run_dir(compose_config([*overrides, "logger=none", "analysis=none"]), run)
    module = assemble(cfg)[1]
    for sub in ("checkpoints", ".hydra"):
        (run / sub).mkdir(parents=True)
    checkpoint = {"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}
    torch.save(checkpoint | {"pytorch-lightning_version": L.__version__}, run / "checkpoints" / "interrupted.ckpt")
    OmegaConf.save(OmegaConf.create({k: v for k, v in cfg.items() if k != "hydra"}), run / "config.yaml", resolve=True)
    choices = dict(cfg.hydra.runtime.choices)
    OmegaConf.save(OmegaConf.create({"hydra": {"runtime": {"choices": choices}}}), run / ".hydra" / "hydra.yaml")
    (run / "results.json").write_text(json.dumps(record or INTERRUPTED))
    return run


def resumed(run: Path):
    overrides = [f"resume={run}"]
    return effective_config(with_run_dir(compose_config(overrides), run), overrides, multirun=False)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_an_interrupted_run_of_every_experiment_resumes_with_its_whole_format(tmp_path, experiment):
    """resume= compares the whole problem format with the checkpoint's (it rebuilt it from four fields, and
    refused every run with mixed_lengths or round_numbers: experiment=add10, add_length, sub_length)."""
    run = interrupted_run(tmp_path / "run", f"experiment={experiment}")
    cfg = resumed(run)
    assert cfg.resume.endswith("interrupted.ckpt")
    written = OmegaConf.load(run / "config.yaml").data
    assert {k: cfg.data[k] for k in ("mixed_lengths", "round_numbers")} == {
        k: written[k] for k in ("mixed_lengths", "round_numbers")
    }


def test_a_format_field_the_checkpoint_was_not_trained_with_is_still_refused(tmp_path):
    run = interrupted_run(tmp_path / "run", "experiment=add10", "data.digits=3", "data.n_val=200")
    config = OmegaConf.load(run / "config.yaml")
    config.data.mixed_lengths = 0.0
    OmegaConf.save(config, run / "config.yaml")
    with pytest.raises(ConfigError, match="data.mixed_lengths=0.0 but the checkpoint .* trained with data.mixed_le"):
        resumed(run)


def test_a_working_the_checkpoint_was_not_trained_with_is_refused(tmp_path):
    """running_product=false is format_dict's default (not saved): the layouts themselves are compared."""
    run = interrupted_run(tmp_path / "run", "experiment=mul_nm", "data.digits=3", "data.n_val=200")
    config = OmegaConf.load(run / "config.yaml")
    config.data.line_end_sees_next = False  # lines ending on their own line: other place ids
    OmegaConf.save(config, run / "config.yaml")
    with pytest.raises(ConfigError, match="with RunningProduct, but the checkpoint .* with RunningProduct \\(lines"):
        resumed(run)
    config.data.running_product = False  # long multiplication's working instead: another layout
    OmegaConf.save(config, run / "config.yaml")
    with pytest.raises(ConfigError, match="with Working, but the checkpoint .* with RunningProduct"):
        resumed(run)


@pytest.mark.parametrize("wandb_id", ["bad/id", "a:b", " x", "", "x" * 200, 7])
def test_a_wandb_id_wandb_would_reject_is_one_line_before_anything_is_written(tmp_path, wandb_id):
    run = interrupted_run(tmp_path / "run", *SHORT_RUN[:5], record={**INTERRUPTED, "wandb_run_id": wandb_id})
    before = (run / "results.json").read_bytes()
    with pytest.raises(ConfigError, match="wandb_run_id=.* is not an id wandb takes") as refused:
        resumed(run)
    assert "\n" not in str(refused.value) and (run / "results.json").read_bytes() == before


@pytest.mark.parametrize(
    "value",
    ["runs/x", "multirun/2026/0_a=b,c=d", "0_data.operators='+-'", 'a "quoted" dir', "back\\slash\\", "sp ace,=$x"],
)
def test_an_override_is_read_back_exactly_as_an_argument_and_through_a_shell(value):
    argument = hydra_override("resume", value)  # what train.py puts in sys.argv itself: no shell between
    assert OverridesParser.create().parse_override(argument).value() == value
    assert shlex.split(override("resume", value)) == [argument]  # the shell's quotes are the shell's


@pytest.mark.slow  # two short trainings (~15 s)
def test_the_resume_command_an_interrupted_sweep_job_prints_works_when_pasted_into_a_shell(tmp_path):
    job = tmp_path / "0_data.digits=2,seed=1"  # a sweep job's directory: characters Hydra reads as syntax
    overrides = [*SHORT_RUN, "analysis=none", "threads=1", "trainer.max_steps=20", "target_accuracy=null"]
    stopped = subprocess.run(
        [sys.executable, "tests/stop_at.py", "10", hydra_override("hydra.run.dir", job), *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert stopped.returncode == 128 + signal.SIGINT, stopped.stderr[-2000:]
    command = json.loads((job / "results.json").read_text())["resume"]
    assert command in stopped.stderr  # the command the line prints is the one recorded
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')  # the command's python
    (bin_dir / "python").chmod(0o755)
    env = os.environ | {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((job / "results.json").read_text())["status"] == "ok"


def test_a_resume_that_fails_puts_back_the_record_it_replaced_as_it_was(tmp_path):
    run = RunDir(tmp_path / "run")
    run.interrupted_checkpoint.parent.mkdir(parents=True)
    run.interrupted_checkpoint.write_bytes(b"the state the run continues from")
    run.results.write_text(json.dumps({**INTERRUPTED, "resume": "python train.py resume=run", "wandb_run_id": "x1"}))
    before = run.results.read_bytes()
    run.mark_running(str(run.interrupted_checkpoint), run.read_results())
    assert run.status == "running"
    run.mark_failed("UsageError: wandb rejected the run")  # nothing to do with the run: it can still be continued
    assert run.results.read_bytes() == before

    run.mark_running(str(run.interrupted_checkpoint), run.read_results())
    run.interrupted_checkpoint.unlink()  # the state it continued is gone: the failure is the truth now
    run.mark_failed("it failed")
    assert run.read_results() == {"schema": 2, "status": "failed", "error": "it failed"}


def test_a_new_run_that_fails_is_recorded_failed_and_a_finished_one_never(tmp_path):
    run = RunDir(tmp_path / "run")
    run.mark_running(None, {})
    run.mark_failed("broken")
    assert run.status == "failed"
    run.write_results({"status": "ok", "test_exact_match": 1.0})
    run.mark_failed("broken after the record")
    assert run.read_results()["status"] == "ok"


DDP_RUN = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "threads=1", "logger=none", "analysis=none"]
DDP_RUN += [
    "trainer.max_steps=30",
    "trainer.val_check_interval=10",
    "target_accuracy=null",
    "callbacks.attention_maps=null",
]
DDP_RUN += ["data.digits=2", "data.n_val=100", "data.n_test=100"]


@pytest.mark.slow  # three 2-process trainings on the CPU (gloo), ~40 s each
def test_a_two_process_run_interrupted_and_resumed_equals_the_run_uninterrupted(tmp_path):
    """DDP resume exactness: a 2-process gloo run stopped by a real Ctrl-C at step 20 (tests/stop_at.py, the first
    process) and resumed ends with the metrics and learning curve of the same run uninterrupted."""
    from tests.test_exact_resume import interrupted_at, record

    env = {**os.environ, "WANDB_MODE": "offline"}
    whole = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={tmp_path / 'whole'}", *DDP_RUN],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert whole.returncode == 0, whole.stderr[-2000:]
    stopped = interrupted_at(20, tmp_path / "run", *DDP_RUN)
    state = json.loads((tmp_path / "run" / "results.json").read_text())
    assert stopped.returncode == 130 and state["status"] == "interrupted" and state["step"] == 20, state
    resumed = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), f"resume={tmp_path / 'run'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert record(tmp_path / "run") == record(tmp_path / "whole")
