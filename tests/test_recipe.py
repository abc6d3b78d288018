"""The training recipe: Muon for the hidden matrices beside AdamW, its schedule, and checkpoints of either recipe."""

from __future__ import annotations

import copy

import pytest
import torch

from data.datamodule import ArithmeticDataModule
from model.module import (
    AdamWSchedule,
    BatchedMuon,
    CalculatorModule,
    MuonAdamW,
    hidden_matrices,
    optimizer_for,
    scheduler_for,
)
from model.reference import RefGPT, nanogpt_init
from model.transformer import Transformer, TransformerConfig
from tests.conftest import compose_config, with_run_dir


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
    opt = optimizer_for(net, AdamWSchedule(matrices="muon"))
    muon, adamw = opt.parts
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    in_adamw = {id(p) for g in adamw.param_groups for p in g["params"]}
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
    a, b = BatchedMuon(ours, lr=0.02), torch.optim.Muon(theirs, lr=0.02)
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
    recipe = AdamWSchedule(matrices="muon", lr=1e-2, muon_lr=0.05, warmup_steps=10, decay_steps=100, min_lr_ratio=0.1)
    opt = optimizer_for(net, recipe)
    sched = scheduler_for(opt, recipe, max_steps=1000)
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
    opt = optimizer_for(net, AdamWSchedule(matrices="muon"))
    for p in net.parameters():
        p.grad = torch.randn_like(p)
    opt.step()
    saved = copy.deepcopy(opt.state_dict())
    again = optimizer_for(net, AdamWSchedule(matrices="muon"))
    again.load_state_dict(saved)
    assert isinstance(again, MuonAdamW) and len(again.state) == len(list(net.parameters()))
    for p in net.parameters():
        for key, value in opt.state[p].items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(again.state[p][key]))


def test_a_checkpoint_from_before_the_recipe_settings_loads_as_adamw():
    dm = ArithmeticDataModule()
    old_optim = {"lr": 3e-3, "weight_decay": 0.1, "betas": [0.9, 0.98], "warmup_steps": 100, "min_lr_ratio": 0.1}
    model = TransformerConfig(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len).to_dict()
    module = CalculatorModule(model, dm.fmt.to_dict(), old_optim)
    assert module.schedule.matrices == "adamw" and module.schedule.decay_steps is None
    assert isinstance(optimizer_for(module, module.schedule), torch.optim.AdamW)


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
