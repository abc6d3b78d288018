"""A long number times a short one (data.b_digits, model.place_of=anchored): the draws keep b short in every split
and at every width, and b's anchored digits reach every column of a product of any length."""

from __future__ import annotations

import pytest
import torch

from analysis.metrics.length import long_problems
from data.build import arithmetic_data, data_module, data_settings
from data.positions import place_ids, positions, shifted
from data.short_operand import b_digits
from data.tokenizer import CharTokenizer
from model.build import build_transformer, transformer_config
from model.positions import ANCHORS
from tests.test_length import random_place_scores

SHORT = {"digits": 6, "operators": "*", "b_digits": 1, "mixed_lengths": True, "n_val": 50, "n_test": 50}


def operands(row: list[int]) -> tuple[int, int]:
    a, b = CharTokenizer().decode(row).split("=")[0].split("*")
    return int(a), int(b)


def test_a_short_b_is_drawn_in_training_at_every_width_and_in_both_held_out_sets():
    dm = data_module(data_settings(**SHORT, mixed_widths=True))
    assert b_digits(dm.fmt) == 1
    stream, widths = dm.training_stream(), set()
    for i in range(30):
        batch = stream.draw(i)[0]  # (batch, seq_len) at one width: '*' writes 4 * digits + 4 tokens
        widths.add((batch.shape[-1] - 4) // 4)
        pairs = [operands(row) for row in batch.tolist()]
        assert all(b < 10 for _, b in pairs) and max(b for _, b in pairs) == 9
    assert widths == set(range(1, 7))  # every width of a, b one digit throughout
    for split in ("val", "test"):
        pairs = [operands(row) for row in dm.held_out_set(split).tolist()]
        assert all(b < 10 for _, b in pairs) and max(len(str(a)) for a, _ in pairs) == 6


def test_b_digits_is_checked_with_its_key_named():
    with pytest.raises(ValueError, match=r"b_digits=-1: must be a whole number >= 0 \(0: b as long as a\)"):
        arithmetic_data(data_settings(**{**SHORT, "b_digits": -1}))
    assert b_digits(arithmetic_data(data_settings(**{**SHORT, "b_digits": 0})).fmt) == 0  # 0: b as long as a


def test_the_length_analysis_asks_a_short_b_of_exactly_its_digits():
    problems = long_problems("*", 40, 50, b_digits=2)
    assert all(len(str(p.a)) == 40 and 10 <= p.b < 100 for p in problems)


def anchored_net(digits: int = 4):
    """A 2-layer model with b anchored and a place window of 1, its place scores random."""
    fmt = arithmetic_data(data_settings(**{**SHORT, "digits": digits})).fmt
    cfg = transformer_config(
        vocab_size=CharTokenizer().vocab_size, block_size=fmt.seq_len, d_model=32, n_heads=4, n_layers=2,
        place_embedding=True, place_vectors=False, position_embedding=False, place_of="anchored", place_bias=1,
        place_window=True,
    )  # fmt: skip
    return random_place_scores(build_transformer(cfg, fmt)), fmt


def test_b_is_anchored_its_digits_negative_places_the_rest_as_coupling_gives_them():
    fmt = arithmetic_data(data_settings(**SHORT)).fmt
    anchored, coupled = place_ids(fmt, "anchored"), place_ids(fmt, "predicted")
    for p, mine, theirs in zip(positions(fmt), anchored, coupled, strict=True):
        assert mine == (-theirs if p.kind == "b" else theirs)
    assert shifted(torch.tensor(anchored), torch.tensor([7]))[0].tolist() == [
        x + 7 if x > 0 else x for x in anchored
    ]  # moved up for training, b's places stay


def test_every_column_of_a_long_product_sees_bs_digits_each_by_its_own_place():
    net, fmt = anchored_net()
    long = fmt.at_width(300)
    places = torch.tensor(place_ids(long, "anchored"))
    table = net.places.place_score_table(long.seq_len, long.seq_len, places)  # (L, 1, H, T, T)
    layout = positions(long)
    b_units = next(i for i, p in enumerate(layout) if p.kind == "b" and p.place == 0)
    b_tens = b_units - 1
    answers = [i for i, p in enumerate(layout) if p.kind == "answer"]
    for column in (answers[0], answers[150], answers[-1]):  # the query writing the next digit, anywhere
        q = column - 1
        assert torch.isfinite(table[..., q, b_units]).all()  # b's units: seen from every column
        assert torch.equal(table[..., q, b_units], table[..., answers[0] - 1, b_units])  # with the same score
        assert not torch.equal(table[..., q, b_units], table[..., q, b_tens])  # told apart from b's tens
    a_units = next(i for i, p in enumerate(layout) if p.kind == "a" and p.place == 0)
    assert torch.isinf(table[..., answers[150] - 1, a_units]).all()  # a's far digits stay hidden (the window)
    b_high = [i for i, p in enumerate(layout) if p.kind == "b" and p.place >= ANCHORS]
    assert torch.isinf(table[..., answers[0] - 1, b_high]).all()  # b's zeros above its anchors: hidden from all
    with pytest.raises(ValueError, match="place_of=anchored needs place_vectors=false"):
        transformer_config(vocab_size=17, block_size=8, place_embedding=True, place_of="anchored", place_bias=1)


def test_experiment_mul_n1_builds_a_model_whose_analyses_ask_a_short_b(tmp_path):
    from tests.conftest import compose_config, with_run_dir
    from training.assemble import build_objects

    datamodule, module, _, _ = build_objects(with_run_dir(compose_config(["experiment=mul_n1"]), tmp_path))
    assert b_digits(module.fmt) == 1 and module.fmt == datamodule.fmt  # the trained format, with its short b
    assert module.net.cfg.places.place_of == "anchored" and not module.net.has_table  # any length
