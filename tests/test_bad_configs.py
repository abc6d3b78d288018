"""Every configuration mistake is one line naming the key, exit status 2, no traceback, no run directory left.

The kinds: a value out of range or of the wrong type (each object's own rule), a key or option mistyped
(with the nearest valid one), a key added that nothing reads, an interpolation that cannot resolve, a device
that is not there, and settings that would silently train nothing. In-process for all of them (fast), and
through ``python train.py`` for a sample (fast) and for all of them (slow).
"""

from __future__ import annotations

import pytest
import torch

from tests.conftest import compose_config, run_train, with_run_dir
from training.assemble import assemble
from training.cli import check_command_line
from training.config import ConfigError
from training.limits import Sizes, check_sizes, machine_cores, memory_estimate, sizes_of
from training.resume import effective_config

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
    ("data.operators=/", "data.operators='/'"),
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
    ("data.hard_share=0.5", "data.hard_share=0.5"),  # no hard_fade_steps: would never fade
    ("data.hard_fade_steps=-1", "data.hard_fade_steps=-1"),
    ("model.place_embedding=maybe", "model.place_embedding"),
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
    ("threads=0", "threads=0"),
    ("target_accuracy=1.5", "target_accuracy=1.5"),
    ("resume=/nonexistent/run", "resume=/nonexistent/run"),
    ("analysis.probes=[12/4]", "analysis.probes"),
    ("analysis.probes=[]", "analysis.probes"),
    ("analysis.prune=sometimes", "analysis.prune='sometimes'"),
    ("analysis.ablation=[shuffle]", "analysis.ablation"),
    ("analysis.n_problems=0", "analysis.n_problems=0"),
    ("analysis.tolerance=2", "analysis.tolerance=2"),
    ("logger.wandb.mode=sideways", "logger.wandb.mode='sideways'"),
    ("callbacks.attention_maps.every_n_val=0", "callbacks.attention_maps.every_n_val=0"),
    ("callbacks.attention_maps.probes=[1+2+3]", "callbacks.attention_maps.probes"),
    # sizes this machine cannot hold, refused before anything is allocated (training/limits.py)
    ("data.batch_size=100000000", "data.batch_size=100000000: the run would need about"),
    ("data.eval_batch_size=100000000", "data.eval_batch_size=100000000: the run would need about"),
    ("model.n_layers=100000", "model.n_layers=100000: the run would need about"),
    ("model.d_model=100000", "model.d_model=100000: the run would need about"),
    ("model.mlp_ratio=100000", "model.mlp_ratio=100000: the run would need about"),
    ("data.batch_size=100000 model.n_layers=1000", "model.n_layers=1000: the run would need about"),
    ("threads=100000", "threads=100000 is not allowed: use a whole number in [1, "),
    (f"threads={machine_cores() + 1}", f"this machine has {machine_cores()} cores"),
    # keys and options mistyped: the nearest valid one is suggested
    ("model.n_head=8", "did you mean model.n_heads"),
    ("+model.n_head=8", "did you mean +model.n_heads"),
    ("data.digit=4", "did you mean data.digits"),
    ("optim.learning_rate=1e-3", "optim.learning_rate"),
    ("model=calcuator", "did you mean calculator"),
    ("trainer=gpus", "did you mean gpu"),
    ("logger=wandbb", "did you mean wandb"),
    ("experiment=add11", "did you mean add10"),
    ("analysis.prunes=greedy", "did you mean analysis.prune"),
    ("+foo=bar", "+foo"),
    ("+trainer.num_node=2", "did you mean +trainer.num_nodes"),
    ("+experiment=add10", "write experiment=... (no +)"),
    # interpolations that cannot resolve
    ("seed=${seed}", "seed"),
    ("data.digits=${nothing.here}", "data.digits"),
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
    try:
        check_command_line(argv)  # typos, additions, interpolations, used directories
    except SystemExit as e:
        assert e.code == 2
        return capsys.readouterr().err
    cfg = with_run_dir(compose_config(argv), tmp_path / "run")
    with pytest.raises(ConfigError) as caught:
        assemble(effective_config(cfg, overrides, multirun=False))
    return f"error: {caught.value}\n"


@pytest.mark.parametrize("overrides,needle", BAD_CONFIGS + ABSENT_DEVICES)
def test_a_bad_config_is_one_line_naming_the_key(overrides, needle, tmp_path, capsys):
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
    "data.batch_size=64": lambda run: run["data"].batch_size == 64,
    "data.streaming=false": lambda run: not run["data"].streaming,
    "data.n_train=5000": lambda run: run["data"].n_train == 5000,
    "data.n_test=100": lambda run: len(run["data"].held_out_set("test")) == 100,
    "data.val_fraction=0.1": lambda run: run["data"].sampler.fractions["val"] == 0.1,
    "optim.lr=1e-3": lambda run: run["module"].optim.lr == 1e-3,
    "optim.weight_decay=0": lambda run: run["module"].optim.weight_decay == 0,
    "optim.warmup_steps=10": lambda run: run["module"].optim.warmup_steps == 10,
    "trainer.max_steps=7": lambda run: run["trainer"].max_steps == 7,
    "trainer.precision=bf16-mixed": lambda run: run["trainer"].precision == "bf16-mixed",
    "trainer.gradient_clip_val=0.5": lambda run: run["trainer"].gradient_clip_val == 0.5,
    "seed=4294967295": lambda run: True,  # the largest seed Lightning takes: no error is what is checked
    "threads=1": lambda run: torch.get_num_threads() == 1,
    "target_accuracy=1": lambda run: True,
    "analysis.probes=[12*4]": lambda run: run["analysis"].probes == ["12*4"],
    "analysis.prune=greedy": lambda run: run["analysis"].prune == "greedy",
    "analysis.tolerance=0.5": lambda run: run["analysis"].tolerance == 0.5,
    "logger.wandb.mode=disabled": lambda run: run["loggers"][0]._wandb_init["mode"] == "disabled",
    "callbacks.attention_maps.every_n_val=1": lambda run: run["maps"].every_n_val == 1,
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
        data, module, analysis, callbacks, loggers, trainer = assemble(effective_config(cfg, overrides, False))
        maps = next(c for c in callbacks if type(c).__name__ == "AttentionMaps")
        run = dict(data=data, module=module, analysis=analysis, loggers=loggers, trainer=trainer, maps=maps)
        assert [o for o, holds in GOOD_VALUES.items() if not holds(run)] == []
    finally:
        torch.set_num_threads(threads)
    assert "error:" not in capsys.readouterr().err


CLI_SAMPLE = [
    "data.batch_size=100000000",
    "threads=100000",
    "model.n_heads=3",
    "model.n_head=8",
    "data.streaming=false data.n_train=10",
    "seed=5000000000",
]
CLI_CASES = [pytest.param(*case, marks=() if case[0] in CLI_SAMPLE else pytest.mark.slow) for case in BAD_CONFIGS]


@pytest.mark.parametrize("overrides,needle", CLI_CASES + ABSENT_DEVICES[:1])
def test_through_the_command_line_one_line_exit_2_and_no_run_directory(overrides, needle, tmp_path):
    run_dir = tmp_path / "run"
    done = run_train(run_dir, *overrides.split())
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and needle in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not run_dir.exists()  # nothing began, so nothing is left behind


def test_the_memory_estimate_counts_the_parameters_the_model_has(tmp_path):
    """The estimate's parameter count is within 1% of the built model's, for the default and a wider, deeper
    model with untied weights and grouped-query heads."""
    for overrides in ([], ["model.d_model=128", "model.n_layers=3", "model.n_kv_heads=2", "model.tie_weights=false"]):
        cfg = with_run_dir(compose_config(overrides), tmp_path / "run")
        estimate = memory_estimate(sizes_of(cfg))
        module = assemble(cfg)[1]
        built = sum(p.numel() for p in module.net.parameters())
        assert abs(estimate.parameters - built) <= 0.01 * built, (overrides, estimate.parameters, built)
        assert estimate.total > 16 * built


def test_the_size_check_refuses_just_over_the_memory_left_and_passes_just_under(tmp_path):
    cfg = with_run_dir(compose_config([]), tmp_path / "run")
    need = memory_estimate(sizes_of(cfg)).total
    assert check_sizes(cfg, (need, "test")) is None
    message = check_sizes(cfg, (need - 1, "test"))
    assert message.startswith("the model and batch sizes: the run would need about") and "(test)" in message
    assert check_sizes(cfg, (None, "unknown")) is None  # an OS that does not say: no check, no crash
    cfg.model.d_model = "abc"  # an invalid value is its owner's to report, not the estimate's
    assert sizes_of(cfg) is None and isinstance(Sizes, type)
