"""The training recipe: Muon for the hidden matrices beside AdamW, its schedule, and checkpoints of either recipe."""

from __future__ import annotations

import copy

import hydra
import pytest
import torch

from data.arithmetic import DataConfig
from data.build import data_module
from model.reference import RefGPT, nanogpt_init
from model.transformer import Transformer, TransformerConfig
from tests.conftest import compose_config, with_run_dir
from training.load import calculator_module
from training.optim import (
    MuonAdamW,
    OldOptimizerStates,
    OptimConfig,
    hidden_matrices,
    lr_schedule,
    optimizer_for,
    upgrade_checkpoint,
)


def small_net() -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=16, block_size=14))


def test_muon_takes_the_blocks_matrices_and_adamw_the_rest():
    net = small_net()
    hidden = {id(p) for p in hidden_matrices(net)}
    names = {n for n, p in net.named_parameters() if id(p) in hidden}
    assert names == {
        f"blocks.{i}.{w}.weight" for i in range(2) for w in ("attn.W_q", "attn.W_k", "attn.W_v", "attn.W_o")
    } | {f"blocks.{i}.mlp.{w}.weight" for i in range(2) for w in ("fc_in", "fc_out")}
    opt = optimizer_for(net, OptimConfig(matrices="muon"))
    assert isinstance(opt, torch.optim.Optimizer) and [g["rule"] for g in opt.param_groups] == ["muon", *["adamw"] * 2]
    assert {id(p) for p in opt.param_groups[0]["params"]} == hidden
    in_adamw = {id(p) for g in opt.param_groups[1:] for p in g["params"]}
    assert in_adamw.isdisjoint(hidden) and len(in_adamw) + len(hidden) == len(list(net.parameters()))
    # the reference model: its fused c_attn and projections, not its embeddings or tied head
    ref = RefGPT(16, 14)
    assert {id(p) for p in hidden_matrices(ref)} == {
        id(b.c_attn.weight) for b in ref.blocks
    } | {id(getattr(b, n).weight) for b in ref.blocks for n in ("c_proj", "c_fc", "mlp_proj")}  # fmt: skip


def test_batched_muon_steps_as_torchs_muon():
    net = small_net()
    other = copy.deepcopy(net)
    ours, theirs = hidden_matrices(net), hidden_matrices(other)
    a = optimizer_for(net, OptimConfig(matrices="muon", muon_lr=0.02, weight_decay=0.1))  # Muon's rule on `ours`
    b = torch.optim.Muon(theirs, lr=0.02)
    for _ in range(3):
        for p, q in zip(ours, theirs, strict=True):
            g = torch.randn_like(p)
            p.grad, q.grad = g.clone(), g.clone()
        a.step()
        b.step()
    for p, q in zip(ours, theirs, strict=True):
        # torch orthogonalises in bf16, ours in fp32 on a CPU: equal to bf16's rounding of a 0.02-sized update
        torch.testing.assert_close(p, q, atol=2e-3, rtol=0)
        assert a.state[p]["momentum_buffer"].equal(b.state[q]["momentum_buffer"])


def test_one_schedule_drives_both_learning_rates():
    net = small_net()
    recipe = OptimConfig(matrices="muon", lr=1e-2, muon_lr=0.05, warmup_steps=10, decay_steps=100, min_lr_ratio=0.1)
    opt = optimizer_for(net, recipe)
    sched = lr_schedule(opt, recipe, max_steps=1000)
    lrs = []
    for _ in range(150):
        lrs.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()
    muon, adamw, _ = zip(*lrs, strict=True)  # Muon's group, then AdamW's two
    assert muon[0] == pytest.approx(0.005) and adamw[0] == pytest.approx(0.001)  # 1/10 of the way up
    assert max(muon) == pytest.approx(0.05) and max(adamw) == pytest.approx(1e-2)
    assert muon[100] == muon[149] == pytest.approx(0.005) and adamw[120] == pytest.approx(1e-3)  # decayed, held


def test_the_combined_optimizer_saves_and_restores_both_parts():
    net = small_net()
    opt = optimizer_for(net, OptimConfig(matrices="muon"))
    for p in net.parameters():
        p.grad = torch.randn_like(p)
    opt.step()
    saved = copy.deepcopy(opt.state_dict())
    again = optimizer_for(net, OptimConfig(matrices="muon"))
    again.load_state_dict(saved)
    assert isinstance(again, MuonAdamW) and len(again.state) == len(list(net.parameters()))
    for p in net.parameters():
        for key, value in opt.state[p].items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(again.state[p][key]))


def test_a_checkpoint_from_before_the_recipe_settings_loads_as_adamw():
    dm = data_module()
    old_optim = {"lr": 3e-3, "weight_decay": 0.1, "betas": [0.9, 0.98], "warmup_steps": 100, "min_lr_ratio": 0.1}
    model = TransformerConfig(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len).to_dict()
    module = calculator_module(model, dm.fmt.to_dict(), old_optim)
    assert module.optim.matrices == "adamw" and module.optim.decay_steps is None
    assert [g["rule"] for g in optimizer_for(module, module.optim).param_groups] == ["adamw", "adamw"]


@pytest.mark.parametrize(
    "override, says",
    [
        ("optim.matrices=sgd", "matrices='sgd': must be one of adamw, muon"),
        ("optim.muon_lr=0", "muon_lr=0: must be a number > 0"),
        ("optim.muon_momentum=1", "muon_momentum=1: must be a number in [0, 1)"),
        ("optim.decay_steps=0", "decay_steps=0: must be a whole number >= 1"),
    ],
)
def test_bad_recipe_values_are_one_line(override, says, tmp_path):
    from training.assemble import assemble
    from training.config import ConfigError

    cfg = with_run_dir(compose_config(["optim=muon", override, "logger=none"]), tmp_path)
    with pytest.raises(ConfigError) as e:
        assemble(cfg)
    assert str(e.value).startswith(f"optim.{says}") and "\n" not in str(e.value)


def test_the_reference_starts_from_nanogpts_initialisation():
    torch.manual_seed(0)
    ref = nanogpt_init(RefGPT(16, 14, n_layers=2))
    assert ref.blocks[0].c_attn.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert ref.blocks[1].c_proj.weight.std().item() == pytest.approx(0.01, rel=0.15)
    assert all(b.c_fc.bias.abs().sum() == 0 for b in ref.blocks)


# ---- optimizer states saved before training/optim.py (base commit 82c774e): the shapes its code wrote ----------
def old_muon_recipe(net: torch.nn.Module, lr: float = 0.02, adamw_lr: float = 3e-3) -> tuple:
    """The Muon recipe's optimizers as training/module.py built them before: torch.optim.Muon (whose subclass it
    stepped; same state) for the hidden matrices, and a fused AdamW with decayed matrices and undecayed vectors;
    saved as ``{"parts": [muon, adamw]}``."""
    hidden = hidden_matrices(net)
    rest = [p for p in net.parameters() if all(p is not q for q in hidden)]
    muon = torch.optim.Muon(hidden, lr=lr, weight_decay=0.1, momentum=0.95)
    adamw = torch.optim.AdamW(
        [
            {"params": [p for p in rest if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in rest if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=adamw_lr,
        betas=(0.9, 0.98),
        fused=True,
    )
    return muon, adamw


def old_adamw_recipe(net: torch.nn.Module, warmup: int, max_steps: int) -> tuple:
    """The AdamW recipe as it was built before: torch.optim.AdamW (fused), and its SequentialLR -- LinearLR up, then
    CosineAnnealingLR down to lr * 0.1 at max_steps."""
    matrices, vectors = [p for p in net.parameters() if p.dim() >= 2], [p for p in net.parameters() if p.dim() < 2]
    groups = [{"params": matrices, "weight_decay": 0.1}, {"params": vectors, "weight_decay": 0.0}]
    adamw = torch.optim.AdamW(groups, lr=3e-3, betas=(0.9, 0.98), fused=True)
    lr_ = torch.optim.lr_scheduler
    warm = lr_.LinearLR(adamw, start_factor=1.0 / warmup, total_iters=warmup)
    cosine = lr_.CosineAnnealingLR(adamw, T_max=max_steps - warmup, eta_min=3e-3 * 0.1)
    return adamw, lr_.SequentialLR(adamw, [warm, cosine], milestones=[warmup])


def random_grads(net: torch.nn.Module, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(p.shape, generator=generator) for p in net.parameters()]


def set_grads(net: torch.nn.Module, grads: list[torch.Tensor]) -> None:
    for p, g in zip(net.parameters(), grads, strict=True):
        p.grad = g.clone()


def assert_same_state(mine: dict, theirs: dict) -> None:
    """Two optimizer states are one, tensor for tensor and setting for setting."""
    assert mine["param_groups"] == theirs["param_groups"]
    assert mine["state"].keys() == theirs["state"].keys()
    for k, state in mine["state"].items():
        assert state.keys() == theirs["state"][k].keys()
        assert all(torch.equal(v, theirs["state"][k][key]) for key, v in state.items())


def test_a_muon_recipe_state_saved_in_two_parts_resumes_where_it_stopped():
    net = small_net()
    muon, adamw = old_muon_recipe(net)
    for step in range(3):
        set_grads(net, random_grads(net, step))
        muon.step()
        adamw.step()
    checkpoint = {"optimizer_states": [{"parts": [muon.state_dict(), adamw.state_dict()]}]}
    upgrade_checkpoint(checkpoint)
    resumed = optimizer_for(net, OptimConfig(matrices="muon", lr=3e-3))
    resumed.load_state_dict(copy.deepcopy(checkpoint["optimizer_states"][0]))
    assert [g["rule"] for g in resumed.param_groups] == ["muon", "adamw", "adamw"]
    hidden = {id(p) for p in hidden_matrices(net)}
    for p in net.parameters():  # each parameter's own state, under its own rule
        old = (muon if id(p) in hidden else adamw).state[p]
        assert resumed.state[p].keys() == old.keys()
        assert all(torch.equal(v, old[k]) for k, v in resumed.state[p].items())
    # the next step: AdamW's parameters move exactly as the old AdamW moves them, Muon's momentum as torch's
    before = copy.deepcopy(net)
    set_grads(net, random_grads(net, 3))
    resumed.step()
    set_grads(before, random_grads(before, 3))
    old_muon, old_adamw = old_muon_recipe(before)
    old_muon.load_state_dict(muon.state_dict())
    old_adamw.load_state_dict(adamw.state_dict())
    old_muon.step()
    old_adamw.step()
    for (name, p), q in zip(net.named_parameters(), before.parameters(), strict=True):
        if id(p) in hidden:  # torch orthogonalises in bf16, MuonAdamW in fp32 on a CPU (see the test above)
            torch.testing.assert_close(p, q, atol=2e-3, rtol=0)
            assert resumed.state[p]["momentum_buffer"].equal(old_muon.state[q]["momentum_buffer"])
        else:
            assert torch.equal(p, q), name


def test_an_adamw_recipe_state_and_its_sequential_schedule_resume_on_the_one_curve():
    net, warmup, max_steps, stopped = small_net(), 100, 1000, 60  # the recipe's warmup
    adamw, sequential = old_adamw_recipe(net, warmup, max_steps)
    old_lrs = []
    for step in range(stopped):
        set_grads(net, random_grads(net, step))
        adamw.step()
        sequential.step()
        old_lrs.append(adamw.param_groups[0]["lr"])
    checkpoint = {"optimizer_states": [adamw.state_dict()], "lr_schedulers": [sequential.state_dict()]}
    upgrade_checkpoint(checkpoint)
    recipe = OptimConfig(warmup_steps=warmup)
    resumed = optimizer_for(net, recipe)
    schedule = lr_schedule(resumed, recipe, max_steps)
    resumed.load_state_dict(copy.deepcopy(checkpoint["optimizer_states"][0]))
    schedule.load_state_dict(checkpoint["lr_schedulers"][0])
    assert_same_state(
        resumed.state_dict(),
        {**adamw.state_dict(), "param_groups": [{"rule": "adamw", **g} for g in adamw.state_dict()["param_groups"]]},
    )
    assert schedule.last_epoch == stopped and schedule.get_last_lr() == [old_lrs[-1]] * 2
    set_grads(net, random_grads(net, stopped))
    resumed.step()
    schedule.step()
    fresh = optimizer_for(small_net(), recipe)
    curve = lr_schedule(fresh, recipe, max_steps)
    for _ in range(stopped + 1):
        fresh.step()
        curve.step()
    assert [g["lr"] for g in resumed.param_groups] == [g["lr"] for g in fresh.param_groups]  # the one curve now
    sequential.step()
    # the old warmup rose from 1/warmup of the rate to all of it in `warmup` steps, this one's from 1/warmup in
    # warmup - 1: 1/warmup of the rate apart at most, the cosine after it the same curve
    assert resumed.param_groups[0]["lr"] == pytest.approx(adamw.param_groups[0]["lr"], rel=1 / warmup)


def test_lightning_resumes_a_checkpoint_holding_an_old_optimizer_state(tmp_path):
    """Through Lightning's own restore: the recipe's callback (``OldOptimizerStates``, which training/assemble.py
    gives every trainer) upgrades the state before the optimizer loads it."""
    import lightning as L

    dm = data_module(DataConfig(digits=2, n_val=10, n_test=10, val_fraction=0.05, test_fraction=0.05))
    model = dict(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len, d_model=32, n_heads=4, n_layers=2)
    recipe = OptimConfig(matrices="muon", warmup_steps=2, decay_steps=20)
    module = calculator_module(model, dm.fmt.to_dict(), recipe.to_dict())
    quiet = dict(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
    first = L.Trainer(max_steps=2, limit_val_batches=0, **quiet)
    first.fit(module, datamodule=dm)
    path = tmp_path / "old.ckpt"
    first.save_checkpoint(path)
    checkpoint = torch.load(path, weights_only=False)
    muon, adamw = old_muon_recipe(module, lr=recipe.muon_lr, adamw_lr=recipe.lr)  # stepped once, as before
    set_grads(module, random_grads(module, 0))
    muon.step()
    adamw.step()
    checkpoint["optimizer_states"] = [{"parts": [muon.state_dict(), adamw.state_dict()]}]
    torch.save(checkpoint, path)

    class Restored(L.Callback):
        def on_train_start(self, trainer, pl_module):
            self.state = copy.deepcopy(trainer.optimizers[0].state_dict())

    restored = Restored()
    again = calculator_module(model, dm.fmt.to_dict(), recipe.to_dict())
    second = L.Trainer(max_steps=3, limit_val_batches=0, callbacks=[restored, OldOptimizerStates()], **quiet)
    second.fit(again, datamodule=dm, ckpt_path=path)
    assert second.global_step == 3
    expected = {"optimizer_states": [{"parts": [muon.state_dict(), adamw.state_dict()]}]}
    upgrade_checkpoint(expected)
    assert_same_state(restored.state, expected["optimizer_states"][0])


def test_the_stop_at_the_target_waits_for_the_loss_margin():
    """configs/callbacks/default.yaml's stop: every validation problem right (target_accuracy) and a validation loss
    under target_loss; either alone does not stop a run, and target_loss=null is the exact-match stop alone."""
    from types import SimpleNamespace

    from lightning.pytorch.trainer.states import TrainerFn

    from training.callbacks import TargetStop

    def stops(exact_match: float, loss: float, loss_below: float | None = 0.01) -> bool:
        """One validation's end, through the callback's public hook, as a fitting trainer calls it."""
        stop = TargetStop(monitor="val/exact_match", mode="max", stopping_threshold=0.9999, loss_below=loss_below,
                          patience=1_000_000)  # fmt: skip
        trainer = SimpleNamespace(
            state=SimpleNamespace(fn=TrainerFn.FITTING), sanity_checking=False, fast_dev_run=False, should_stop=False,
            callback_metrics={"val/exact_match": torch.tensor(exact_match), "val/loss": torch.tensor(loss)},
            strategy=SimpleNamespace(reduce_boolean_decision=lambda decision, all: decision),
            global_rank=0, current_epoch=0,
        )  # fmt: skip
        stop.on_validation_end(trainer, None)
        assert stop.stopping_threshold == 0.9999  # the threshold is the run's again after each check
        return trainer.should_stop

    assert stops(1.0, 0.005) and not stops(1.0, 0.02) and not stops(0.999, 0.005)
    assert stops(1.0, 0.02, loss_below=None)  # target_loss=null: the first perfect validation stops it
    cfg = compose_config([])
    stop = hydra.utils.instantiate(cfg.callbacks.early_stopping)
    assert isinstance(stop, TargetStop) and stop.loss_below == cfg.target_loss == 0.01
    assert stop.stopping_threshold == cfg.target_accuracy
    off = hydra.utils.instantiate(compose_config(["target_accuracy=null"]).callbacks.early_stopping)
    assert off.stopping_threshold is None  # no stop at all: all of trainer.max_steps


def test_the_progress_bar_has_a_theme_of_its_own():
    """StepProgressBar's look is its own theme's: Lightning's default theme, one object shared by every
    RichProgressBar of the process, is left as it was."""
    from lightning.pytorch.callbacks import RichProgressBar

    from training.callbacks import StepProgressBar

    before = RichProgressBar().theme.metrics_text_delimiter
    ours = StepProgressBar()
    assert ours.theme.metrics_text_delimiter == "  " and ours.theme is not RichProgressBar().theme
    assert RichProgressBar().theme.metrics_text_delimiter == before
