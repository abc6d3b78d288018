"""Every config file composes, and the overrides the README promises reach the objects they configure."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import hydra
import pytest
import torch
from omegaconf import DictConfig, ListConfig, OmegaConf

from data.arithmetic import DataConfig
from data.build import ResearchSettings, data_module
from model.device import gpus_short
from model.positions import PLACE_FIELDS, PlaceConfig
from storage.rundir import RunDir
from tests.conftest import CONFIGS, compose_config, with_run_dir
from training.config import check

GROUP_OPTIONS = [
    (group.name, f.stem) for group in sorted(CONFIGS.iterdir()) if group.is_dir() for f in sorted(group.glob("*.yaml"))
]


# What the README and docs promise each group offers: built below with the files that are there (one missing fails).
PROMISED = {
    ("model", "calculator"),
    ("data", "addition"),
    ("data", "subtraction"),
    ("data", "multiplication"),
    ("data", "mixed"),
    ("trainer", "cpu"),
    ("trainer", "gpu"),
    ("trainer", "ddp"),
    ("logger", "wandb"),
    ("logger", "csv"),
    ("logger", "none"),
    ("callbacks", "default"),
    ("optim", "adamw"),
}
BUILT = {  # group -> the class its options build (what "each file builds the object it is named after" means)
    "model": "TransformerConfig",
    "data": "DataSettings",
    "optim": "OptimConfig",
    "trainer": "Trainer",
    "analysis": "HeadAnalysis",
}
ACCELERATORS = {"cpu": "CPUAccelerator", "gpu": "CUDAAccelerator", "cuda": "CUDAAccelerator", "mps": "MPSAccelerator"}
# Where a built object keeps a setting that it does not keep under the setting's own name.
READ_BACK = {
    **{("model", name): (lambda n: lambda cfg: getattr(cfg.places or PlaceConfig(), n))(name) for name in PLACE_FIELDS},
    ("trainer", "accelerator"): lambda t: type(t.accelerator).__name__,
    ("trainer", "devices"): lambda t: t.num_devices,
    ("trainer", "strategy"): lambda t: type(t.strategy).__name__.removesuffix("Strategy").lower(),
    ("trainer", "enable_model_summary"): lambda t: any(type(c).__name__ == "ModelSummary" for c in t.callbacks),
}
MISSING = object()
# The default run's speed recipe on top of the lesson's data (configs/data/addition.yaml): batches of 128 with hard
# cases fading by step 300, where DataConfig keeps the lesson's 256 and ResearchSettings has every research piece off.
RUN_RECIPE = {("data", "batch_size"), ("data", "hard_share"), ("data", "hard_fade_steps")}


@pytest.mark.parametrize(
    "group,option", [("data", "addition"), ("model", "calculator"), ("optim", "adamw"), ("analysis", "default")]
)
def test_a_default_option_and_its_class_hold_the_same_defaults(group, option):
    """What a run uses (the YAML) and what the code does unconfigured (notebooks, tests) are the same recipe: a
    value changed in one place and not the other fails here."""
    node = OmegaConf.load(CONFIGS / group / f"{option}.yaml")
    target = hydra.utils.get_object(node._target_)  # a class, or model.build.transformer_config
    classes = (DataConfig, ResearchSettings) if group == "data" else (target,)  # data_settings parts its keys
    defaults: dict = {}  # a key both hold (operators: the lesson's, and division's run-wide one) is the lesson's
    for c in classes:
        for name, p in inspect.signature(c).parameters.items():
            defaults.setdefault(name, p.default)
    values = OmegaConf.to_container(node, resolve=False)  # data.seed: ${seed} stays a string, and is skipped
    checked = [key for key, value in values.items() if key != "_target_" and not str(value).startswith("${")]
    assert len(checked) >= 5
    for key in checked:
        default = defaults[key]
        assert default is not inspect.Parameter.empty, f"{group}.{key} has no default in {target.__name__}"
        same = values[key] == (list(default) if isinstance(default, tuple) else default)
        assert same != ((group, key) in RUN_RECIPE), key  # the recipe's keys differ, and only they


def read_back(obj, group: str, key: str):
    """The value a built object holds for config key ``key``: READ_BACK's place for it, else an attribute of that
    name (or _name), of its problem format or its lesson and research settings, or wandb's init arguments."""
    if (group, key) in READ_BACK:
        return READ_BACK[group, key](obj)
    init = getattr(obj, "_wandb_init", None)
    if init is not None and key in init:
        return init[key]
    for holder in (obj, *(getattr(obj, part, None) for part in ("fmt", "config", "research"))):
        for name in (key, f"_{key}"):
            if holder is not None and hasattr(holder, name):
                return getattr(holder, name)
    return MISSING


def assert_built_with(obj, group: str, node, run_dir, name: str = "") -> None:
    """Every value the config node gives is the one the built object holds."""
    for key, value in OmegaConf.to_container(node, resolve=True).items():
        if key == "_target_":
            continue
        if key == "run_dir":  # our callbacks keep the paths they derive from the run directory
            held = [str(v) for v in vars(obj).values() if isinstance(v, (str, Path, RunDir))]
            assert any(Path(v).is_relative_to(run_dir) for v in held), (group, name, key, vars(obj))
            continue
        got = read_back(obj, group, key)
        if group == "trainer" and key == "accelerator":
            value = ACCELERATORS.get(value, got)  # auto: whichever Lightning picked
        if isinstance(got, tuple):
            got = list(got)
        assert got is not MISSING, f"{group}.{name}{key}: the built {type(obj).__name__} does not hold it"
        assert got == value or str(got) == str(value), (group, name, key, value, got)


def file_values(group: str, option: str) -> dict:
    """The settings an option's own file writes (its defaults list left out), as dotted keys of the whole config."""
    raw = OmegaConf.to_container(OmegaConf.load(CONFIGS / group / f"{option}.yaml"), resolve=False) or {}
    raw.pop("defaults", None)
    header = re.match(r"# @package (\S+)", (CONFIGS / group / f"{option}.yaml").read_text())
    package = header.group(1) if header else group  # experiments are @package _global_, positions @package model
    prefix = "" if package == "_global_" else f"{package}."
    flat = {}

    def walk(node, key):
        if isinstance(node, dict) and node and "_target_" not in node and not key.endswith("sweeper.params"):
            for k, v in node.items():
                walk(v, f"{key}.{k}" if key else k)
        else:
            flat[key] = node

    walk(raw, prefix.rstrip("."))
    return flat


@pytest.mark.parametrize("group,option", sorted(set(GROUP_OPTIONS) | PROMISED))
def test_every_config_file_composes_and_builds_what_it_names(group, option, tmp_path):
    cfg = with_run_dir(compose_config([f"{group}={option}"]), tmp_path)
    assert cfg.hydra.runtime.choices[group] == option
    for key, value in file_values(group, option).items():  # what the file says is what composes
        if isinstance(value, str) and "${" in value:
            continue  # an interpolation: resolved, checked on the built object
        composed = OmegaConf.select(cfg, key)
        composed = OmegaConf.to_container(composed) if isinstance(composed, (DictConfig, ListConfig)) else composed
        assert composed == value, (key, value, composed)
    if group == "experiment":  # the objects it configures build, with its values
        check(cfg)
        settings = hydra.utils.instantiate(cfg.data)
        dm = data_module(settings)
        assert_built_with(settings, "data", cfg.data, tmp_path)
        net = hydra.utils.instantiate(cfg.model, vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len)
        assert_built_with(net, "model", cfg.model, tmp_path)
        return
    group = "model" if group == "position" else group  # a position option sets model keys (@package model)
    node = cfg.get(group)
    if group in BUILT and node:
        if group == "trainer" and node.accelerator in ("gpu", "auto") and gpus_short(node.get("devices", 1)):
            node.accelerator = "cpu"  # building a GPU trainer needs its GPUs; the class and the rest are checked
        # the model's sizes come from the data; the trainer's loggers are built by train.py from their own group
        kwargs = {"model": {"vocab_size": 17, "block_size": 32}, "trainer": {"logger": False}}.get(group, {})
        built = hydra.utils.instantiate(node, **kwargs)
        assert type(built).__name__ == BUILT[group]
        assert_built_with(built, group, node, tmp_path)
    elif node:  # callbacks and loggers: a dict of named objects, each built from its own _target_
        for name, child in node.items():
            built = hydra.utils.instantiate(child)  # loggers are lazy: building one starts no run
            assert type(built).__name__ == child._target_.rsplit(".", 1)[-1], name
            assert_built_with(built, group, child, tmp_path, f"{name}.")
    else:
        assert option in ("none",)  # only the 'none' options switch a group off


LAUNCHERS = sorted(p.stem for p in (CONFIGS / "hydra" / "launcher").glob("*.yaml"))


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_every_launcher_composes(launcher):
    plugin = {"parallel": "hydra_plugins.hydra_joblib_launcher", "slurm": "hydra_plugins.hydra_submitit_launcher"}
    pytest.importorskip(plugin[launcher], reason='needs pip install -e ".[sweep]"')
    cfg = compose_config([f"hydra/launcher={launcher}"])
    assert cfg.hydra.launcher._target_.split(".")[1] in plugin[launcher]


def test_defaults_are_the_course_calculator(tmp_path):
    cfg = with_run_dir(compose_config(), tmp_path)
    assert (cfg.model.d_model, cfg.model.n_heads) == (64, 4)
    assert cfg.logger.wandb.mode == "offline"
    assert (cfg.data.digits, cfg.data.operators) == (3, "+")


def test_documented_overrides_reach_the_objects(tmp_path):
    cfg = with_run_dir(
        compose_config(
            [
                "model.d_model=32",
                "model.n_heads=8",
                "model.n_kv_heads=2",
                "model.n_layers=3",
                "data.digits=4",
                "data.operators=+-",
                "trainer.max_steps=7",
                "seed=5",
                "logger=none",
            ]
        ),
        tmp_path,
    )
    model_cfg = hydra.utils.instantiate(cfg.model, vocab_size=17, block_size=32)
    assert (model_cfg.d_model, model_cfg.n_heads, model_cfg.n_kv_heads, model_cfg.n_layers) == (32, 8, 2, 3)
    dm = data_module(hydra.utils.instantiate(cfg.data))
    assert (dm.fmt.digits, dm.fmt.operators, dm.data.seed) == (4, "+-", 5)
    assert cfg.trainer.max_steps == 7 and not cfg.get("logger")


@pytest.mark.parametrize("experiment", ["head_sweep", "why_multi_head"])
def test_an_experiment_overrides_the_top_level_defaults(experiment, tmp_path):
    cfg = with_run_dir(compose_config([f"experiment={experiment}"]), tmp_path)
    assert cfg.target_accuracy is None and cfg.trainer.max_steps == 1500  # equal budgets, no early stop
    assert "model.n_heads" in cfg.hydra.sweeper.params


def test_add10_is_ten_digit_addition_with_eight_heads_of_eight(tmp_path):
    cfg = with_run_dir(compose_config(["experiment=add10"]), tmp_path)
    check(cfg)
    dm = data_module(hydra.utils.instantiate(cfg.data))
    assert (dm.fmt.digits, dm.fmt.operators, dm.fmt.reverse_answer, dm.fmt.seq_len) == (10, "+", True, 35)
    assert (cfg.model.d_model, cfg.model.n_heads, cfg.model.n_layers) == (64, 8, 2)
    hard = dm.data.mix.hard  # hard cases early: the recipe of docs/arithmetic.md
    assert hard is not None and hard.share > 0
    assert cfg.target_accuracy is None  # all its steps: the last weights with every validation problem right are kept


def test_the_length_experiments_train_on_short_problems_with_places_seen_only_as_differences(tmp_path):
    for experiment, operators in (("add_length", "+"), ("sub_length", "-")):
        cfg = with_run_dir(compose_config([f"experiment={experiment}"]), tmp_path / experiment)
        check(cfg)
        dm = data_module(hydra.utils.instantiate(cfg.data))
        assert (dm.fmt.digits, dm.fmt.operators, dm.fmt.mixed_lengths) == (10, operators, 1.0)
        assert dm.fmt.larger_first == (operators == "-")
        model = cfg.model
        assert (model.place_window, model.place_bias, model.position_embedding, model.place_vectors) == (
            True, 1, False, False
        )  # a window of one place, no place table: any length  # fmt: skip


@pytest.mark.parametrize("experiment,digits,operators", [("mul2", 2, "*"), ("mixed", 2, "+-*"), ("mul3", 3, "*")])
def test_multiplication_experiments_show_their_working(experiment, digits, operators, tmp_path):
    cfg = with_run_dir(compose_config([f"experiment={experiment}"]), tmp_path)
    check(cfg)
    dm = data_module(hydra.utils.instantiate(cfg.data))
    assert (dm.fmt.digits, dm.fmt.operators, dm.fmt.show_work) == (digits, operators, True)
    assert len(dm.held_out_set("test")) > 900  # the 2-digit spaces are small: a tenth of them is held out


def test_sub3_is_signed_three_digit_subtraction(tmp_path):
    cfg = with_run_dir(compose_config(["experiment=sub3"]), tmp_path)
    check(cfg)
    dm = data_module(hydra.utils.instantiate(cfg.data))
    assert (dm.fmt.digits, dm.fmt.operators, dm.fmt.signed, dm.fmt.answer_len) == (3, "-", True, 4)


def test_add10_speedrun_is_add10s_task_stopped_by_its_validation_loss(tmp_path):
    cfg = with_run_dir(compose_config(["experiment=add10_speedrun"]), tmp_path)
    check(cfg)  # every key it sets is one train.py knows, with a value it takes
    dm = data_module(hydra.utils.instantiate(cfg.data)).data
    add10 = hydra.utils.instantiate(compose_config(["experiment=add10"]).data).research  # the format's draws
    assert (dm.fmt.digits, dm.fmt.operators, dm.fmt.reverse_answer, dm.fmt.seq_len) == (10, "+", True, 35)
    assert (dm.fmt.mixed_lengths, dm.fmt.round_numbers) == (add10.mixed_lengths, add10.round_numbers)
    assert dm.mix.hard is not None and dm.mix.hard.share > 0
    assert (cfg.model.d_model, cfg.model.n_heads, cfg.model.n_layers) == (64, 4, 2)  # the default calculator
    assert (cfg.model.place_window, cfg.model.place_bias, cfg.model.place_vectors) == (True, 1, False)  # local
    assert cfg.hydra.runtime.choices.optim == "muon" and cfg.hydra.runtime.choices.analysis == "none"
    stop = hydra.utils.instantiate(cfg.callbacks.early_stopping)  # it stops when done, not at max_steps
    assert (stop.monitor, stop.stopping_threshold, stop.monitor_op(torch.tensor(0.001), torch.tensor(0.002))) == (
        "val/loss", 0.002, True
    )  # fmt: skip
    assert cfg.target_accuracy is None and cfg.callbacks.attention_maps is None
