"""resume= reads a run directory as data: its config.yaml gives values only, never code, and must agree with the
checkpoint; a damaged config.yaml or results.json is one line (training/resume.py)."""

from __future__ import annotations

import json
import shutil

import lightning as L
import pytest
import torch
from omegaconf import OmegaConf

from tests.conftest import SMALL_TASK, compose_config, run_train, with_run_dir
from training.assemble import assemble
from training.config import ConfigError
from training.resume import effective_config

OVERRIDES = [*SMALL_TASK, "analysis=none", "logger=none", "trainer.max_steps=20"]


@pytest.fixture(scope="module")
def run_template(tmp_path_factory):
    """A run directory as an interrupted run leaves it, made without training: config.yaml, .hydra/hydra.yaml
    with the groups chosen, and checkpoints/interrupted.ckpt of the (untrained) model."""
    run = tmp_path_factory.mktemp("template") / "run"
    cfg = with_run_dir(compose_config(OVERRIDES), run)
    module = assemble(cfg)[1]
    for sub in ("checkpoints", ".hydra"):
        (run / sub).mkdir(parents=True)
    checkpoint = {
        "state_dict": module.state_dict(),
        "hyper_parameters": dict(module.hparams),
        "pytorch-lightning_version": L.__version__,
    }
    torch.save(checkpoint, run / "checkpoints" / "interrupted.ckpt")
    saved = OmegaConf.create({k: v for k, v in cfg.items() if k != "hydra"})
    OmegaConf.save(saved, run / "config.yaml", resolve=True)
    choices = {"model": "calculator", "data": "addition", "logger": "none", "analysis": "none", "experiment": None}
    OmegaConf.save(OmegaConf.create({"hydra": {"runtime": {"choices": choices}}}), run / ".hydra" / "hydra.yaml")
    (run / "results.json").write_text(json.dumps({"status": "interrupted", "train_seconds": 1.5}))
    return run


@pytest.fixture
def run(run_template, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_template, copy)
    return copy


def resumed(run, *extra):
    overrides = [f"resume={run}", *extra]
    cfg = with_run_dir(compose_config(overrides), run)
    return effective_config(cfg, overrides, multirun=False)


def refusal(run) -> str:
    with pytest.raises(ConfigError) as caught:
        resumed(run)
    message = str(caught.value)
    assert "\n" not in message
    return message


def edit(run, change):
    config = OmegaConf.load(run / "config.yaml")
    change(config)
    OmegaConf.save(config, run / "config.yaml")


def test_an_untouched_run_resumes_with_its_values_and_the_projects_code(run):
    cfg = resumed(run, "trainer.max_steps=40")
    assert cfg.data.digits == 2 and cfg.trainer.max_steps == 40 and cfg.resume.endswith("interrupted.ckpt")
    assert cfg.callbacks.best_checkpoint._target_ == "training.callbacks.BestCheckpoint"
    assemble(cfg)  # and it builds


def test_a_run_saved_when_its_classes_lived_elsewhere_resumes(run):
    """config.yaml of a run from before training/optim.py names the optimizer settings' old home, one from before
    data/build.py's data_settings the data's: still resumed."""
    edit(run, lambda c: c.optim.__setitem__("_target_", "model.module.AdamWSchedule"))
    assert resumed(run).optim._target_ == "training.optim.OptimConfig"
    for old in ("data.arithmetic.DataConfig", "data.datamodule.ArithmeticDataModule"):  # the data's settings' homes
        edit(run, lambda c, old=old: c.data.__setitem__("_target_", old))
        assert assemble(resumed(run)) and resumed(run).data._target_ == "data.build.data_settings"
    edit(run, lambda c: c.optim.__setitem__("_target_", "model.module.OptimConfig"))  # no such old home
    assert "optim._target_='model.module.OptimConfig' names code" in refusal(run)


def test_a_callback_added_to_config_yaml_is_refused_and_never_runs(run):
    (run / "payload.pkl").write_bytes(b"not reached")
    edit(run, lambda c: c.callbacks.__setitem__("evil", {"_target_": "torch.load", "f": str(run / "payload.pkl")}))
    assert "callbacks.evil is not a setting of this project's config" in refusal(run)


@pytest.mark.parametrize(
    "change,needle",
    [
        (lambda c: c.callbacks.progress_bar.__setitem__("_target_", "torch.load"), "callbacks.progress_bar._target_"),
        (lambda c: c.model.__setitem__("_target_", "os.system"), "model._target_='os.system' names code"),
        (lambda c: c.model.__setitem__("_args_", ["rm -rf /"]), "model._args_"),
        (lambda c: c.trainer.__setitem__("plugins", {"_target_": "torch.load"}), "trainer.plugins"),
        (lambda c: c.__setitem__("seed", "${oc.env:HOME}"), "an interpolation"),
        (lambda c: c.__setitem__("model", 3), "model=3"),
        (lambda c: c.model.__setitem__("n_heads", 8), "model.n_heads=8 but the checkpoint"),
        (lambda c: c.data.__setitem__("digits", 3), "data.digits=3 but the checkpoint"),
        (lambda c: c.model.__setitem__("bias", 1), "model.bias=1 but the checkpoint"),
    ],
)
def test_code_unknown_keys_and_disagreements_with_the_checkpoint_are_one_line(run, change, needle):
    edit(run, change)
    assert needle in refusal(run)


def test_where_files_go_is_the_resumed_directory_never_a_path_from_the_file(run, tmp_path):
    edit(run, lambda c: c.callbacks.best_checkpoint.__setitem__("run_dir", str(tmp_path / "elsewhere")))
    cfg = resumed(run)
    assert cfg.callbacks.best_checkpoint.run_dir == str(run)


@pytest.mark.parametrize("text", ["", "[1, 2]", "model: {d_model: 64\n", "!!python/object/apply:os.system [ls]"])
def test_an_empty_or_invalid_config_yaml_is_one_line(run, text):
    (run / "config.yaml").write_text(text)
    assert str(run / "config.yaml") in refusal(run)


@pytest.mark.parametrize("text", ['{"status": "interrupted", "train_sec', "[]", '{"train_seconds": "soon"}'])
def test_a_damaged_results_json_is_refused_rather_than_resetting_train_seconds(run, text):
    (run / "results.json").write_text(text)
    assert "train_seconds counted from 0" in refusal(run)


def test_a_group_choice_that_is_no_option_here_is_refused(run):
    hydra = run / ".hydra" / "hydra.yaml"
    hydra.write_text(hydra.read_text().replace("logger: none", "logger: ../../etc/passwd"))
    assert "not an option of logger" in refusal(run)


@pytest.mark.slow
def test_through_the_command_line_an_edited_run_is_one_line_exit_2_and_untouched(tmp_path):
    run = tmp_path / "run"
    done = run_train(run, *OVERRIDES)
    assert done.returncode == 0, done.stderr
    checkpoint = run / "checkpoints" / "best.ckpt"
    config = OmegaConf.load(run / "config.yaml")
    config.model.n_heads = 8
    OmegaConf.save(config, run / "config.yaml")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    done = run_train(run, f"resume={checkpoint}", "trainer.max_steps=40")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "model.n_heads=8" in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p in before} == before
