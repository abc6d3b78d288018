"""bench.py's training section: every figure it reports is measured and consistent, and the nanoGPT-style
reference it races against is the same function as our model."""

from __future__ import annotations

import torch

from model.module import CalculatorModule
from model.reference import RefGPT
from model.transformer import Transformer
from training.speed import bench_train, reference_loss, step_flops


def test_train_benchmark_reports_side_by_side_figures():
    r = bench_train(rounds=1, steps=4, warmup=2)
    for path in ("lightning", "bare", "nanogpt"):
        assert r["ms_per_step"][path] > 0
    assert r["lightning_over_bare"] == round(
        r["tokens_per_second_by_path"]["lightning"] / r["tokens_per_second_by_path"]["bare"], 3
    )
    assert r["tokens_per_second"] == r["tokens_per_second_by_path"]["lightning"]
    assert 0 < r["mfu"] < 1 and r["matmul_peak_gflops"] > 1 and r["data_problems_per_second"] > 0
    assert 0 < r["matmul_share_of_step"] < 1
    # ours skips the last layer's MLP on prompt positions, so it does less work per token than the reference
    assert r["flops_per_token"] < r["reference_flops_per_token"]


def reference_with_weights_of(net: Transformer) -> RefGPT:
    """A RefGPT holding ``net``'s weights: W_q, W_k, W_v stacked into c_attn, the other names mapped."""
    ref = RefGPT(net.cfg.vocab_size, net.cfg.block_size, net.cfg.d_model, net.cfg.n_heads, net.cfg.n_layers)
    with torch.no_grad():
        ref.wte.weight.copy_(net.tok_emb.weight)
        ref.wpe.weight.copy_(net.pos_emb.weight)
        ref.ln_f.load_state_dict(net.ln_f.state_dict())
        for mine, theirs in zip(net.blocks, ref.blocks, strict=True):
            a = mine.attn
            theirs.c_attn.weight.copy_(torch.cat([a.W_q.weight, a.W_k.weight, a.W_v.weight]))
            theirs.c_attn.bias.copy_(torch.cat([a.W_q.bias, a.W_k.bias, a.W_v.bias]))
            for src, dst in (
                (a.W_o, theirs.c_proj),
                (mine.mlp.fc_in, theirs.c_fc),
                (mine.mlp.fc_out, theirs.mlp_proj),
                (mine.ln_attn, theirs.ln_1),
                (mine.ln_mlp, theirs.ln_2),
            ):
                dst.load_state_dict(src.state_dict())
    return ref


def test_the_reference_computes_our_model_given_our_weights():
    torch.manual_seed(0)
    module = CalculatorModule(
        model=dict(vocab_size=17, block_size=14),
        fmt=dict(digits=3),
        optim=dict(lr=1e-3, weight_decay=0.1, betas=[0.9, 0.98], warmup_steps=0, min_lr_ratio=0.1),
    )
    ref = reference_with_weights_of(module.net)
    assert sum(p.numel() for p in module.net.parameters()) == sum(p.numel() for p in ref.parameters())
    seq = torch.randint(17, (8, 14))
    torch.testing.assert_close(ref(seq[:, :-1]), module.net(seq[:, :-1])[0])
    torch.testing.assert_close(reference_loss(ref, seq, module.fmt.prompt_len), module.forced_scores(seq)[0])


def test_step_flops_counts_what_runs():
    torch.manual_seed(0)
    ref = RefGPT(17, 14)
    seq = torch.randint(17, (4, 14))
    total, matmul = step_flops(lambda s: reference_loss(ref, s, 9), seq, n_layers=2, d_model=64)
    linear_weights = sum(m.weight.numel() for m in ref.modules() if isinstance(m, torch.nn.Linear))
    tokens = 4 * 13
    assert matmul == 6 * linear_weights * tokens  # forward 2 x weights x tokens, backward twice that
    assert total == matmul + 12 * 2 * 13 * 64 * tokens
