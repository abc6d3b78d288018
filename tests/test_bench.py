"""bench.py's training section: every figure it reports is measured and consistent."""

from __future__ import annotations

from bench_train import RefGPT, bench_train, flops_per_token
from model.transformer import Transformer, TransformerConfig


def test_train_benchmark_reports_side_by_side_figures():
    r = bench_train(rounds=1, steps=4, warmup=2)
    for path in ("lightning", "bare", "nanogpt"):
        assert r["ms_per_step"][path] > 0
    assert r["lightning_over_bare"] == round(r["tokens_per_second_by_path"]["lightning"]
                                             / r["tokens_per_second_by_path"]["bare"], 3)
    assert r["tokens_per_second"] == r["tokens_per_second_by_path"]["lightning"]
    assert 0 < r["mfu"] < 1 and r["matmul_peak_gflops"] > 1 and r["data_problems_per_second"] > 0


def test_the_reference_model_matches_ours_in_size_and_flops():
    ours = Transformer(TransformerConfig(vocab_size=17, block_size=13))
    reference = RefGPT(17, 13)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters())
    assert flops_per_token(ours, 2, 64, 12) == flops_per_token(reference, 2, 64, 12)
