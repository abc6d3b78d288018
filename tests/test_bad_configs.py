"""Every configuration mistake is one line naming the key, exit status 2, no traceback, no run directory left.

The kinds: a value out of range or of the wrong type (each object's own rule), a key or option mistyped
(with the nearest valid one), a key added that nothing reads, an interpolation that cannot resolve, a device
that is not there, and settings that would silently train nothing. In-process for all of them (fast), and
through ``python train.py`` for a sample (fast) and for all of them (slow).

REACHES_LIGHTNING_OR_WANDB is the table of settings that reach Lightning or wandb (issue 40, class 6): each crashed
after training and testing, reached a traceback or Hydra's multi-line error, or waited forever, before it was
checked before the run begins.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from unittest import mock

import pytest
import torch

from tests.conftest import ROOT, compose_config, run_train, with_run_dir
from training import cli
from training.assemble import assemble
from training.cli import check_command_line, compose_train_config
from training.config import ConfigError, check_supported
from training.limits import Sizes, check_sizes, machine_cores, memory_estimate, sizes_of
from training.resume import effective_config
from training.settings import check_settings

NO_GPU = not torch.cuda.is_available()

BAD_CONFIGS = [  # (overrides, what the one line must contain)
    # values out of range or of the wrong type: the owning object's rule, named by its config key
    ("model.n_heads=3", "model.n_heads=3"),
    ("model.n_kv_heads=3", "model.n_kv_heads=3"),
    ("model.d_model=0", "model.d_model"),
    ("model.d_model=abc", "model.d_model"),
    ("model.n_layers=0", "model.n_layers"),
    ("model.dropout=1.0", "model.dropout=1.0"),
    ("model.dropout=-0.1", "model.dropout=-0.1"),
    ("model.dropout=abc", "model.dropout='abc'"),
    ("model.bias=maybe", "model.bias"),
    ("data.digits=0", "data.digits=0"),
    ("data.digits=18", "data.digits=18"),
    ("data.digits=10 data.operators=*", "data.digits=10"),
    ("data.operators=%", "data.operators='%'"),
    ("data.operators=++", "data.operators='++'"),
    ("data.operators=[1,2]", "data.operators="),
    ("data.batch_size=0", "data.batch_size=0"),
    ("data.n_test=-5", "data.n_test=-5"),
    ("data.val_fraction=0.7", "data.val_fraction=0.7"),
    ("data.streaming=maybe", "data.streaming"),
    ("data.show_work=maybe", "data.show_work"),
    ("data.show_work=true", "data.show_work=true"),  # on '+': there is no working to show
    ("data.streaming=false data.n_train=10", "data.n_train=10"),
    ("data.hard_share=2", "data.hard_share=2"),
    ("data.hard_fade_steps=0", "data.hard_share=0.5"),  # hard cases that would never fade
    ("data.hard_fade_steps=-1", "data.hard_fade_steps=-1"),
    ("model.place_embedding=maybe", "model.place_embedding"),
    # the width the model must address was computed from it before the model checked it: a traceback
    ("model.place_offset=1.5", "model.place_offset=1.5: must be a whole number >= 0"),
    ("model.place_offset=abc", "model.place_offset='abc': must be a whole number >= 0"),
    ("model.place_offset=1e300", "model.place_offset=1e+300: must be a whole number >= 0"),
    ("model.place_offset=-100000000000000000000000", "model.place_offset=-100000000000000000000000: must be"),
    ("model.position_embedding=false", "model.position_embedding=false"),  # and no place embedding: no positions
    ("optim.lr=0", "optim.lr=0"),
    ("optim.lr=-1e-3", "optim.lr=-0.001"),
    ("optim.lr=nan", "optim.lr=nan"),
    ("optim.weight_decay=-1", "optim.weight_decay=-1"),
    ("optim.warmup_steps=1.5", "optim.warmup_steps=1.5"),
    ("optim.betas=[0.9]", "optim.betas"),
    ("trainer.max_steps=0", "trainer.max_steps=0"),
    ("trainer.val_check_interval=0", "trainer.val_check_interval=0"),
    ("trainer.precision=fp8", "trainer.precision='fp8'"),
    ("trainer.gradient_clip_val=nan", "trainer.gradient_clip_val=nan"),
    ("trainer.devices=0", "trainer.devices=0"),
    # Lightning settings that would train nothing and still finish "ok"
    ("+trainer.max_epochs=0", "trainer.max_epochs=0 is not allowed: use one of -1, or null (set trainer.max_steps"),
    ("+trainer.limit_train_batches=0", "trainer.limit_train_batches=0 is not allowed"),
    ("+trainer.fast_dev_run=true", "trainer.fast_dev_run=True is not allowed"),
    ("seed=-1", "seed=-1"),
    ("seed=5000000000", "seed=5000000000"),
    # settings that reach the data past the command line's rules: each is the data's own to check (issue 58,
    # class 5: data.seed=1e23 claimed the run, began training and crashed in the stream; a held-out split too small
    # for its set drew forever, or asked for 10**300 problems)
    ("data.seed=100000000000000000000000", "data.seed=100000000000000000000000: must be a whole number in [0, 4294"),
    ("data.seed=-1", "data.seed=-1: must be a whole number in [0, 4294967295]"),
    ("data.seed=1.5", "data.seed=1.5"),
    ("data.digits=4 data.val_fraction=1e-7", "data.val_fraction=1e-07: the val split holds about 10 problems"),
    ("data.digits=4 data.test_fraction=1e-300", "data.test_fraction=1e-300: the test split holds about"),
    ("data.digits=10 data.n_val=100 data.val_fraction=1e-18", "data.val_fraction=1e-18: the val split holds about"),
    ("data.digits=2 data.val_fraction=1e-300", "data.val_fraction=1e-300: the val split holds about 1e-296 problems"),
    ("threads=0", "threads=0"),
    ("target_accuracy=1.5", "target_accuracy=1.5"),
    ("resume=/nonexistent/run", "resume=/nonexistent/run"),
    ("analysis.probes=[12/4]", "analysis.probes"),
    ("analysis.probes=[]", "analysis.probes"),
    ("analysis.prune=sometimes", "analysis.prune='sometimes'"),
    ("analysis.ablation=[shuffle]", "analysis.ablation"),
    # a list setting given one value or null: one line naming the key (training/config.py: check_lists), not
    # Python's "'int' object is not iterable"
    ("analysis.probes=5", "analysis.probes=5 is not allowed: use a list of text, or null"),
    ("analysis.probes=456+789", "analysis.probes=456+789 is not allowed: use a list of text, or null"),
    ("analysis.ablation=null", "analysis.ablation=null is not allowed: use a list of text such as [zero, mean]"),
    ("analysis.ablation=zero", "analysis.ablation=zero is not allowed: use a list of text such as [zero, mean]"),
    ("callbacks.attention_maps.probes=5", "callbacks.attention_maps.probes=5 is not allowed: use a list of text"),
    ("analysis.n_problems=0", "analysis.n_problems=0"),
    ("analysis.tolerance=2", "analysis.tolerance=2"),
    ("analysis.length_problems=100000000000000000000000", "analysis.length_problems=100000000000000000000000: must"),
    ("logger.wandb.mode=sideways", "logger.wandb.mode='sideways'"),
    ("callbacks.attention_maps.every_n_val=0", "callbacks.attention_maps.every_n_val=0"),
    ("callbacks.attention_maps.probes=[1+2+3]", "callbacks.attention_maps.probes"),
    # sizes this machine cannot hold, refused before anything is allocated (training/limits.py)
    ("data.batch_size=100000000", "data.batch_size=100000000: the run would need about"),
    ("data.eval_batch_size=100000000", "data.eval_batch_size=100000000: the run would need about"),
    ("model.n_layers=100000", "model.n_layers=100000: the run would need about"),
    ("model.d_model=100000", "model.d_model=100000: the run would need about"),
    ("model.mlp_ratio=100000", "model.mlp_ratio=100000: the run would need about"),
    ("data.batch_size=50000 model.n_layers=1000", "model.n_layers=1000: the run would need about"),
    ("threads=100000", "threads=100000 is not allowed: use a whole number in [1, "),
    (f"threads={machine_cores() + 1}", f"this machine has {machine_cores()} cores"),
    # keys and options mistyped: the nearest valid one is suggested
    ("model.n_head=8", "did you mean model.n_heads"),
    ("+model.n_head=8", "did you mean +model.n_heads"),
    ("data.digit=4", "did you mean data.digits"),
    ("heads=8", "did you mean model.n_heads"),  # a word of the setting's name, not a name spelt like it (threads)
    ("layers=3", "did you mean model.n_layers"),
    ("optim.learning_rate=1e-3", "optim.learning_rate"),
    ("model=calcuator", "did you mean calculator"),
    ("trainer=gpus", "did you mean gpu"),
    ("logger=wandbb", "did you mean wandb"),
    ("experiment=add11", "did you mean add10"),
    ("analysis.prunes=greedy", "did you mean analysis.prune"),
    ("+foo=bar", "+foo: not a setting this project supports"),
    ("+trainer.num_node=2", "did you mean +trainer.num_nodes"),
    ("+experiment=add10", "write experiment=... (no +)"),
    # interpolations that cannot resolve
    ("seed=${seed}", "seed"),
    ("data.digits=${nothing.here}", "data.digits"),
]
REACHES_LIGHTNING_OR_WANDB = [  # (overrides, what the one line must contain)
    # crashed after training and testing, marking the run failed with its test results lost
    ("callbacks.best_checkpoint=null", "callbacks.best_checkpoint cannot be switched off: it keeps checkpoints/best"),
    ("~callbacks.best_checkpoint", "callbacks.best_checkpoint cannot be switched off"),
    ("~callbacks", "callbacks.best_checkpoint cannot be switched off"),
    (
        "analysis.ablation=[zero,zero]",
        "analysis.ablation=['zero', 'zero']: must be a list of zero and/or mean, each once",
    ),
    # the trainer's settings: each has a rule; one the project does not manage is refused as such
    ("trainer.check_val_every_n_epoch=1", "trainer.check_val_every_n_epoch=1 is not allowed: use null (the training"),
    ("trainer.check_val_every_n_epoch=abc", "trainer.check_val_every_n_epoch='abc' is not allowed"),
    ("trainer.num_sanity_val_steps=abc", "trainer.num_sanity_val_steps='abc' is not allowed"),
    ("trainer.enable_model_summary=maybe", "trainer.enable_model_summary='maybe' is not allowed"),
    ("+trainer.enable_progress_bar=maybe", "trainer.enable_progress_bar='maybe' is not allowed"),
    ("+trainer.enable_progress_bar=false", "enable_progress_bar=False"),  # Lightning's own refusal, as one line
    ("+trainer.benchmark=maybe", "trainer.benchmark='maybe' is not allowed"),
    ("+trainer.strategy=fsdp", "trainer.strategy='fsdp' is not allowed: use one of auto, ddp"),
    ("+trainer.num_nodes=0", "trainer.num_nodes=0 is not allowed"),
    ("+trainer.num_nodes=2", "trainer.num_nodes=2: no launcher started this process"),  # it waited forever
    ("+trainer.gradient_clip_algorithm=foo", "+trainer.gradient_clip_algorithm: not a setting this project supports"),
    ("+trainer.accumulate_grad_batches=2", "+trainer.accumulate_grad_batches: not a setting this project supports"),
    ("+trainer.max_time=00:00:00:01", "+trainer.max_time: not a setting this project supports"),
    ("+trainer.limit_val_batches=0", "+trainer.limit_val_batches: not a setting this project supports"),
    ("+trainer.enable_checkpointing=false", "+trainer.enable_checkpointing: not a setting this project supports"),
    ("trainer=ddp +trainer.strategy=auto", "+trainer.strategy=...: trainer.strategy is set already; write"),
    ("trainer=null", "trainer=null: choose one of cpu, ddp, gpu"),  # Hydra's "must be a string or a list"
    ("analysis=null", "analysis=null: choose one of default, none; to switch it off: analysis=none"),
    ("callbacks.graceful_stop=5", "callbacks.graceful_stop=5: callbacks.graceful_stop is a group of settings; null"),
    ("logger.wandb=true", "logger.wandb=True: logger.wandb is a group of settings"),
    # the csv logger's settings
    ("logger=csv +logger.csv.flush_logs_every_n_steps=0", "logger.csv.flush_logs_every_n_steps=0 is not allowed"),
    ("logger=csv +logger.csv.prefix=3", "+logger.csv.prefix: not a setting this project supports"),
    ("logger=csv logger.csv.name=[1]", "logger.csv.name=[1] is not allowed: use text, or null"),
    # the Lightning callbacks' settings
    ("callbacks.early_stopping.monitor=foo", "callbacks.early_stopping.monitor='foo' is not allowed"),
    ("callbacks.early_stopping.mode=sideways", "callbacks.early_stopping.mode='sideways' is not allowed"),
    ("callbacks.early_stopping.patience=abc", "callbacks.early_stopping.patience='abc' is not allowed"),
    ("callbacks.early_stopping.stopping_threshold=abc", "callbacks.early_stopping.stopping_threshold='abc' is not"),
    ("+callbacks.early_stopping.strict=false", "+callbacks.early_stopping.strict: not a setting this project supports"),
    ("callbacks.progress_bar.leave=maybe", "callbacks.progress_bar.leave='maybe' is not allowed"),
    ("+callbacks.progress_bar.updates_per_second=0", "callbacks.progress_bar.updates_per_second=0 is not allowed"),
    # what names code, and where the run's files go
    ("callbacks.best_checkpoint._target_=os.system", "callbacks.best_checkpoint._target_: names the code to run"),
    ("trainer._target_=null", "trainer._target_: names the code to run"),
    ("callbacks.graceful_stop.run_dir=/tmp", "callbacks.graceful_stop.run_dir: the run's files all go into its run"),
    ("trainer.default_root_dir=/tmp", "trainer.default_root_dir: the run's files all go into its run directory"),
    ("logger.wandb.save_dir=null", "logger.wandb.save_dir: the run's files all go into its run directory"),
    # what wandb refuses at its first use, once the run has begun
    ("logger.wandb.project=a/b", "logger.wandb.project='a/b': wandb refuses it: Invalid project name"),
    ("logger.wandb.project=[1,2]", "logger.wandb.project=[1, 2]: wandb refuses it"),
    ("logger.wandb.name=[1]", "logger.wandb.name=[1]: wandb refuses it"),
    ("logger.wandb.group=[1]", "logger.wandb.group=[1]: wandb refuses it"),
    ("logger.wandb.tags=[1]", "logger.wandb.tags=[1]: wandb refuses it"),
    ("logger.wandb.tags=[null]", "logger.wandb.tags=[None]: wandb refuses it"),
    ("logger.wandb.tags=[" + "t" * 70 + "]", "Tags must be between 1 and 64 characters"),
    ("logger.wandb.tags=['']", "Tag at index 0 is empty"),
    ("+logger.wandb.id=a/b", "logger.wandb.id='a/b': wandb refuses it: Run ID cannot contain"),
    ("+logger.wandb.resume=maybe", "logger.wandb.resume='maybe': wandb refuses it"),
    ("+logger.wandb.foo=1", "logger.wandb.foo is a wandb setting this project does not support"),
    ("logger.wandb.log_model=maybe", "logger.wandb.log_model='maybe': use true, false or all"),
    # deletions: a group the run needs, or a single setting
    ("~model", "~model: a run cannot be built without its model group; choose model=... (calculator)"),
    ("~data", "~data: a run cannot be built without its data group"),
    ("~optim", "~optim: a run cannot be built without its optim group"),
    ("~trainer", "~trainer: a run cannot be built without its trainer group"),
    ("~trainer.max_steps", "~trainer.max_steps: a setting cannot be deleted"),
    ("~seed", "~seed: a setting cannot be deleted"),
    # the position tables the memory check missed (model.place_offset=1e8 tried to allocate 77 GB)
    ("model.place_offset=100000000", "model.place_offset=100000000: the run would need about"),
    ("position=coupling model.place_offset=100000000", "model.place_offset=100000000: the run would need about"),
    ("position=relative model.place_bias=1000000000", "model.place_bias=1000000000: the run would need about"),
    # one process per device on the CPU, each with the whole run and an interpreter of its own
    ("trainer=ddp trainer.accelerator=cpu trainer.devices=100000", "trainer.devices=100000: the run would need about"),
]
ABSENT_DEVICES = [  # a device that is not there
    pytest.param("trainer=gpu", "no CUDA GPU", marks=pytest.mark.skipif(not NO_GPU, reason="a GPU is here")),
    pytest.param(
        "trainer.accelerator=gpu",
        "trainer.accelerator=gpu",
        marks=pytest.mark.skipif(not NO_GPU, reason="a GPU is here"),
    ),
    pytest.param(
        "trainer.accelerator=mps",
        "trainer.accelerator=mps",
        marks=pytest.mark.skipif(torch.backends.mps.is_available(), reason="an Apple GPU is here"),
    ),
]


def in_process_error(overrides: list[str], tmp_path, capsys) -> str:
    """What train.py would print for these overrides, found without leaving this process."""
    argv = [f"hydra.run.dir={tmp_path / 'run'}", *overrides]
    composed = {}

    def composing(texts: list[str]):  # the config the check composes from argv is the one train.py then builds
        composed[tuple(texts)] = compose_train_config(texts)
        return composed[tuple(texts)]

    try:
        with mock.patch.object(cli, "compose_train_config", composing):
            check_command_line(argv)  # typos, additions, interpolations, used directories
    except SystemExit as e:
        assert e.code == 2
        return capsys.readouterr().err
    cfg = with_run_dir(composed.get(tuple(argv)) or compose_config(argv), tmp_path / "run")
    with pytest.raises(ConfigError) as caught:
        assemble(effective_config(cfg, overrides, multirun=False))
    return f"error: {caught.value}\n"


@pytest.fixture
def no_launcher(monkeypatch):
    """An environment no multi-node launcher started this process in (as on a laptop)."""
    from training.config import LAUNCHER_VARIABLES

    for variable in LAUNCHER_VARIABLES:
        monkeypatch.delenv(variable, raising=False)


@pytest.mark.parametrize("overrides,needle", BAD_CONFIGS + REACHES_LIGHTNING_OR_WANDB + ABSENT_DEVICES)
def test_a_bad_config_is_one_line_naming_the_key(overrides, needle, tmp_path, capsys, no_launcher):
    text = in_process_error(overrides.split(), tmp_path, capsys)
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], text


@pytest.mark.parametrize("overrides", ["trainer=ddp", "trainer=gpu trainer.devices=2"])
def test_more_gpus_than_the_machine_has_is_one_line(overrides, monkeypatch, tmp_path, capsys):
    """On a one-GPU machine (made up here: torch is told it has one) trainer=ddp's accelerator=auto picks CUDA and
    asks for 2 GPUs: one line before anything is built, not Lightning's error after."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    text = in_process_error(overrides.split(), tmp_path, capsys)
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "trainer.devices=2" in lines[0] and "torch sees 1 CUDA GPU here" in lines[0], text
    assert "trainer.accelerator=cpu" in lines[0]  # the way out


GOOD_VALUES = {  # an allowed value for keys the table above gets wrong, and where the built run holds it
    "model.n_heads=8": lambda run: run["module"].net.cfg.n_heads == 8,
    "model.n_kv_heads=2": lambda run: run["module"].net.cfg.n_kv_heads == 2,
    "model.d_model=32": lambda run: run["module"].net.cfg.d_model == 32,
    "model.n_layers=1": lambda run: len(run["module"].net.blocks) == 1,
    "model.dropout=0.1": lambda run: run["module"].net.cfg.dropout == 0.1,
    "model.bias=false": lambda run: run["module"].net.blocks[0].attn.W_q.bias is None,
    "data.digits=2": lambda run: run["data"].fmt.digits == 2,
    "data.operators=+-*": lambda run: run["data"].fmt.operators == "+-*",
    "data.show_work=true": lambda run: run["data"].fmt.show_work,
    "data.batch_size=64": lambda run: run["data"].data.batch_size == 64,
    "data.streaming=false": lambda run: run["data"].data.fixed is not None,
    "data.n_train=5000": lambda run: run["data"].data.fixed.n_train == 5000,
    "data.n_test=100": lambda run: len(run["data"].held_out_set("test")) == 100,
    "data.val_fraction=0.1": lambda run: run["data"].data.sampler.fractions["val"] == 0.1,
    "optim.lr=1e-3": lambda run: run["module"].optim.lr == 1e-3,
    "optim.weight_decay=0": lambda run: run["module"].optim.weight_decay == 0,
    "optim.warmup_steps=10": lambda run: run["module"].optim.warmup_steps == 10,
    "trainer.max_steps=7": lambda run: run["trainer"].max_steps == 7,
    "trainer.precision=bf16-mixed": lambda run: run["trainer"].precision == "bf16-mixed",
    "trainer.gradient_clip_val=0.5": lambda run: run["trainer"].gradient_clip_val == 0.5,
    "seed=4294967295": lambda run: True,  # the largest seed Lightning takes: no error is what is checked
    "data.seed=4294967295": lambda run: run["data"].data.seed == 4294967295,
    "threads=1": lambda run: torch.get_num_threads() == 1,
    "target_accuracy=1": lambda run: True,
    "analysis.probes=[12*4]": lambda run: run["analysis"].probes == ["12*4"],
    "analysis.prune=greedy": lambda run: run["analysis"].prune == "greedy",
    "analysis.tolerance=0.5": lambda run: run["analysis"].tolerance == 0.5,
    "logger.wandb.mode=disabled": lambda run: run["loggers"][0]._wandb_init["mode"] == "disabled",
    "callbacks.attention_maps.every_n_val=1": lambda run: run["maps"].every_n_val == 1,
    # the settings of REACHES_LIGHTNING_OR_WANDB
    "analysis.ablation=[mean]": lambda run: run["analysis"].ablation == ("mean",),
    "trainer.num_sanity_val_steps=0": lambda run: run["trainer"].num_sanity_val_steps == 0,
    "+trainer.num_nodes=1": lambda run: run["trainer"].num_nodes == 1,
    "+trainer.strategy=auto": lambda run: run["trainer"].world_size == 1,
    "callbacks.early_stopping.patience=5": lambda run: run["stopping"].patience == 5,
    "callbacks.early_stopping.monitor=val/loss": lambda run: run["stopping"].monitor == "val/loss",
    "callbacks.early_stopping.mode=min": lambda run: run["stopping"].mode == "min",
    "logger.wandb.project=tinycalc-tests": lambda run: run["loggers"][0]._wandb_init["project"] == "tinycalc-tests",
    "logger.wandb.tags=[a,b]": lambda run: list(run["loggers"][0]._wandb_init["tags"]) == ["a", "b"],
    "model.place_offset=2": lambda run: run["module"].net.cfg.places.place_offset == 2,
}


def test_allowed_values_of_the_same_keys_pass_the_same_checks_and_reach_the_run(tmp_path, capsys):
    """The checks refuse values, not keys: allowed values of the keys above go through the same command-line
    check and assemble() (which raise for every line of BAD_CONFIGS) and end up in the objects built."""
    threads = torch.get_num_threads()
    overrides = list(GOOD_VALUES)
    argv = [f"hydra.run.dir={tmp_path / 'run'}", *overrides]
    check_command_line(argv)  # exits 2 on a refusal
    cfg = with_run_dir(compose_config(argv), tmp_path / "run")
    try:
        torch.set_num_threads(2)  # not what threads=1 asks for, whatever the test process computes with
        data, module, analysis, callbacks, loggers, trainer = assemble(effective_config(cfg, overrides, False))
        maps = next(c for c in callbacks if type(c).__name__ == "AttentionMaps")
        stopping = trainer.early_stopping_callback
        run = dict(data=data, module=module, analysis=analysis, loggers=loggers, trainer=trainer, maps=maps)
        run["stopping"] = stopping
        assert [o for o, holds in GOOD_VALUES.items() if not holds(run)] == []
    finally:
        torch.set_num_threads(threads)
    assert "error:" not in capsys.readouterr().err


SHIPPED = [[], ["trainer=ddp"], ["trainer=gpu"], ["logger=csv"], ["trainer.precision=32"]]
SHIPPED += [[f"experiment={path.stem}"] for path in sorted((ROOT / "configs" / "experiment").glob("*.yaml"))]


@pytest.mark.parametrize("overrides", SHIPPED, ids=lambda o: " ".join(o) or "default")
def test_the_project_s_own_configs_pass_the_rules_of_lightning_s_settings(overrides, no_launcher):
    """The rules refuse what the project does not support, never what it ships: every trainer option and experiment
    (and trainer.precision=32, which the command line reads as a number) passes them."""
    cfg = compose_config(overrides)
    check_supported(cfg)
    check_settings(cfg)  # each setting as declared (training/settings.py)


# Through a real train.py (a few seconds each: the imports): one row of each place a refusal is made -- the
# command line's check, a rule of training/config.py, an object's own rule, wandb's. Every row is checked in-process
# above, the same function train.py calls; the rest of them through train.py in the slow suite.
CLI_SAMPLE = [
    "data.batch_size=100000000",
    "data.seed=100000000000000000000000",
    "model.n_heads=3",
    "model.n_head=8",
    "callbacks.best_checkpoint=null",
    "logger.wandb.project=a/b",
]
CLI_CASES = [
    pytest.param(*case, marks=() if case[0] in CLI_SAMPLE else pytest.mark.slow)
    for case in BAD_CONFIGS + REACHES_LIGHTNING_OR_WANDB
]


@pytest.mark.parametrize(
    "overrides,needle", CLI_CASES + [pytest.param(*ABSENT_DEVICES[0].values, marks=pytest.mark.slow)]
)
def test_through_the_command_line_one_line_exit_2_and_no_run_directory(overrides, needle, tmp_path, no_launcher):
    run_dir = tmp_path / "run"
    done = run_train(run_dir, *overrides.split())
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and needle in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not run_dir.exists()  # nothing began, so nothing is left behind


def test_the_memory_estimate_counts_the_parameters_the_model_has(tmp_path):
    """The estimate's parameter count is within 1% of the built model's, for the default and a wider, deeper
    model with untied weights and grouped-query heads, and for every position table a setting sizes: positions
    and places up to place_offset digits longer, place scores up to place_bias."""
    for overrides in (
        [],
        ["model.d_model=128", "model.n_layers=3", "model.n_kv_heads=2", "model.tie_weights=false"],
        ["model.place_offset=200"],
        ["position=coupling", "model.place_offset=300"],
        ["position=relative", "model.place_bias=2000"],
        ["position=abacus", "model.position_embedding=true", "model.place_offset=100", "data.operators=*"],
    ):
        cfg = with_run_dir(compose_config(overrides), tmp_path / "run")
        estimate = memory_estimate(sizes_of(cfg))
        module = assemble(cfg)[1]
        built = sum(p.numel() for p in module.net.parameters())
        assert abs(estimate.parameters - built) <= 0.01 * built, (overrides, estimate.parameters, built)
        assert estimate.total > 16 * built


def test_each_process_on_the_cpu_holds_the_whole_run_and_its_own_interpreter(tmp_path):
    """trainer.devices on the CPU starts one process each on this machine (trainer=ddp): the estimate counts them."""
    from training.limits import PROCESS

    one = memory_estimate(sizes_of(compose_config(["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=1"])))
    four = memory_estimate(sizes_of(compose_config(["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=4"])))
    assert four.total == 4 * one.total + 3 * PROCESS and four.parameters == one.parameters


def test_the_size_check_refuses_just_over_the_memory_left_and_passes_just_under(tmp_path):
    cfg = with_run_dir(compose_config([]), tmp_path / "run")
    need = memory_estimate(sizes_of(cfg)).total
    assert check_sizes(cfg, (need, "test")) is None
    message = check_sizes(cfg, (need - 1, "test"))
    assert message.startswith("the model and batch sizes: the run would need about") and "(test)" in message
    assert check_sizes(cfg, (None, "unknown")) is None  # an OS that does not say: no check, no crash
    cfg.model.d_model = "abc"  # an invalid value is its owner's to report, not the estimate's
    assert sizes_of(cfg) is None and isinstance(Sizes, type)


def test_a_signal_ends_a_run_waiting_for_a_node_that_never_comes(tmp_path):
    """+trainer.num_nodes=2 under a launcher's environment whose second node never comes waits in torch.distributed's
    rendezvous (C++, where no Python handler runs): SIGTERM ends it at once -- it used to wait out the 30 minutes."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "NODE_RANK": "0",
        "WANDB_MODE": "offline",
    }
    command = [sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={tmp_path / 'run'}", "+trainer.num_nodes=2"]
    process = subprocess.Popen(
        [*command, "threads=1", "logger=none"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    waiting = threading.Event()
    lines = []

    def read() -> None:
        for line in process.stdout:
            lines.append(line.decode(errors="replace"))
            if "Initializing distributed" in lines[-1]:
                waiting.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert waiting.wait(120), "".join(lines)
        time.sleep(1)  # well inside the rendezvous
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == -signal.SIGTERM, "".join(lines)
    finally:
        process.kill()
        process.wait()


def test_a_multi_process_run_waits_for_a_dead_peer_only_as_long_as_stated(tmp_path, no_launcher):
    """trainer=ddp: a process whose peer died mid-step waited in the collective for torch's default 30 minutes; the
    project's DDPStrategy waits DDP_TIMEOUT (training/config.py), in the rendezvous and every collective."""
    from lightning.pytorch.strategies import DDPStrategy

    from training.config import DDP_TIMEOUT

    overrides = ["trainer=ddp", "trainer.accelerator=cpu", "logger=none"]
    cfg = with_run_dir(compose_config([f"hydra.run.dir={tmp_path / 'run'}", *overrides]), tmp_path / "run")
    trainer = assemble(effective_config(cfg, overrides, False))[-1]
    assert isinstance(trainer.strategy, DDPStrategy) and trainer.world_size == 2
    # the timeout DDPStrategy hands torch.distributed.init_process_group: no public reader, its own attribute
    assert trainer.strategy._timeout == DDP_TIMEOUT and DDP_TIMEOUT.total_seconds() <= 300


def test_a_node_that_never_comes_ends_the_wait_in_one_line_after_the_stated_time(no_launcher):
    """+trainer.num_nodes=2 under a launcher's environment whose second node never comes: Lightning's auto strategy
    waited torch's 30 minutes (and trainer=ddp its 2, then tracebacks). Several nodes get the project's DDPStrategy
    too, and a connection that times out is one line naming the settings and how to start every node."""
    import torch.distributed

    from training.assemble import stoppable_while_waiting
    from training.config import DDP_TIMEOUT, distributed, not_joined

    cfg = compose_config(["+trainer.num_nodes=2"])
    assert distributed(cfg.trainer)["strategy"]._timeout == DDP_TIMEOUT  # DDPStrategy's own attribute
    assert distributed(compose_config([]).trainer) == {}  # one process: Lightning's own single-device strategy

    class Waiting:  # a strategy whose rendezvous times out, as torch's does after DDP_TIMEOUT
        def setup_environment(self):
            raise torch.distributed.DistStoreError("Timed out after 121 seconds waiting for clients. 1/2 joined.")

    strategy = Waiting()
    stoppable_while_waiting(strategy, not_joined(cfg.trainer))
    with pytest.raises(ConfigError) as refused:
        strategy.setup_environment()
    line = str(refused.value)
    assert "\n" not in line and line.startswith("trainer.num_nodes=2, trainer.devices=1: the run's other processes")
    assert "within 2 minutes; nothing was trained; start it with  torchrun --nnodes=N" in line


@pytest.mark.slow
def test_through_the_command_line_a_node_that_never_comes_is_one_line_after_the_stated_wait(tmp_path):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NODE_RANK": "0"}
    command = [sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={tmp_path / 'run'}", "+trainer.num_nodes=2"]
    done = subprocess.run([*command, "logger=none"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("Initializing")]
    assert done.returncode == 2 and len(lines) == 1 and "did not connect at 127.0.0.1:" in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
