"""Every config file composes, and the overrides the README promises reach the objects they configure."""

from __future__ import annotations

import inspect

import hydra
import pytest
import torch
from omegaconf import OmegaConf

from tests.conftest import CONFIGS, compose_config, with_run_dir
from training.config import check

GROUP_OPTIONS = [
    (group.name, f.stem) for group in sorted(CONFIGS.iterdir()) if group.is_dir() for f in sorted(group.glob("*.yaml"))
]


def test_every_group_has_its_options():
    options = {(g, o) for g, o in GROUP_OPTIONS}
    for expected in [
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
    ]:
        assert expected in options


BUILT = {  # group -> the class its options build (what "each file builds the object it is named after" means)
    "model": "TransformerConfig",
    "data": "ArithmeticDataModule",
    "optim": "AdamWSchedule",
    "trainer": "Trainer",
    "analysis": "HeadAnalysis",
}


@pytest.mark.parametrize("group,option", [("data", "addition"), ("model", "calculator"), ("optim", "adamw")])
def test_a_default_option_and_its_class_hold_the_same_defaults(group, option):
    """What a run uses (the YAML) and what the code does unconfigured (notebooks, tests) are the same recipe: a
    value changed in one place and not the other fails here."""
    node = OmegaConf.load(CONFIGS / group / f"{option}.yaml")
    target = hydra.utils.get_class(node._target_)
    defaults = {name: p.default for name, p in inspect.signature(target).parameters.items()}
    values = OmegaConf.to_container(node, resolve=False)  # data.seed: ${seed} stays a string, and is skipped
    checked = [key for key, value in values.items() if key != "_target_" and not str(value).startswith("${")]
    assert len(checked) >= 5
    for key in checked:
        default = defaults[key]
        assert default is not inspect.Parameter.empty, f"{group}.{key} has no default in {target.__name__}"
        assert values[key] == (list(default) if isinstance(default, tuple) else default), key


@pytest.mark.parametrize("group,option", GROUP_OPTIONS)
def test_every_config_file_composes_and_builds_what_it_names(group, option, tmp_path):
    cfg = with_run_dir(compose_config([f"{group}={option}"]), tmp_path)
    if group == "experiment":
        assert cfg != with_run_dir(compose_config(), tmp_path)  # it changes something
        return
    node = cfg.get(group)
    if group in BUILT and node:
        if group == "trainer" and node.accelerator == "gpu" and not torch.cuda.is_available():
            node.accelerator = "cpu"  # building a GPU trainer needs a GPU; the class is what is checked
        kwargs = {"vocab_size": 17, "block_size": 32} if group == "model" else {}
        assert type(hydra.utils.instantiate(node, **kwargs)).__name__ == BUILT[group]
    elif node:  # callbacks and loggers: a dict of named objects, each built from its own _target_
        for name, child in node.items():
            built = hydra.utils.instantiate(child)  # loggers are lazy: building one starts no run
            assert type(built).__name__ == child._target_.rsplit(".", 1)[-1], name
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
    dm = hydra.utils.instantiate(cfg.data)
    assert (dm.fmt.digits, dm.fmt.operators, dm.seed) == (4, "+-", 5)
    assert cfg.trainer.max_steps == 7 and not cfg.get("logger")


@pytest.mark.parametrize("experiment", ["head_sweep", "why_multi_head"])
def test_an_experiment_overrides_the_top_level_defaults(experiment, tmp_path):
    cfg = with_run_dir(compose_config([f"experiment={experiment}"]), tmp_path)
    assert cfg.target_accuracy is None and cfg.trainer.max_steps == 1500  # equal budgets, no early stop
    assert "model.n_heads" in cfg.hydra.sweeper.params


def test_add10_is_ten_digit_addition_with_eight_heads_of_eight(tmp_path):
    cfg = with_run_dir(compose_config(["experiment=add10"]), tmp_path)
    check(cfg)
    dm = hydra.utils.instantiate(cfg.data)
    assert (dm.fmt.digits, dm.fmt.operators, dm.fmt.reverse_answer, dm.fmt.seq_len) == (10, "+", True, 35)
    assert (cfg.model.d_model, cfg.model.n_heads, cfg.model.n_layers) == (64, 8, 2)
    assert dm.hard is not None and dm.hard.share > 0  # hard cases early: the recipe of docs/arithmetic.md
    assert cfg.target_accuracy is not None  # stops early once the validation set is all right


@pytest.mark.parametrize("experiment,digits,operators", [("mul2", 2, "*"), ("mixed", 2, "+-*"), ("mul3", 3, "*")])
def test_multiplication_experiments_show_their_working(experiment, digits, operators, tmp_path):
    cfg = with_run_dir(compose_config([f"experiment={experiment}"]), tmp_path)
    check(cfg)
    dm = hydra.utils.instantiate(cfg.data)
    assert (dm.fmt.digits, dm.fmt.operators, dm.fmt.show_work) == (digits, operators, True)
    assert len(dm.held_out_set("test")) > 900  # the 2-digit spaces are small: a tenth of them is held out


def test_sub3_is_signed_three_digit_subtraction(tmp_path):
    cfg = with_run_dir(compose_config(["experiment=sub3"]), tmp_path)
    check(cfg)
    dm = hydra.utils.instantiate(cfg.data)
    assert (dm.fmt.digits, dm.fmt.operators, dm.fmt.signed, dm.fmt.answer_len) == (3, "-", True, 4)
