"""Long division at any length (experiment=div_n1, model.place_of=stepped): every token carries its role beside its
place, so a step tells the running remainder from the digit of a it brings down; what a step computes is then the
same at every length, and the length analysis asks the hard divisions first."""

from __future__ import annotations

import pytest
import torch

from analysis.metrics.division_length import long_problems
from data.build import problem_format
from data.division import tokenizer_for
from data.positions import ROLES, STEP_ROLES, place_ids, place_tensor, positions, role_ids, split_roles
from data.text import prompt_text, written_text
from model.build import build_transformer, transformer_config
from tests.test_length import random_place_scores

N_BY_2 = {"digits": 4, "operators": "/", "b_digits": 2, "show_work": True, "reverse_answer": True}


def stepped_net(settings=N_BY_2):
    """A 2-layer model with b anchored, roles and a place window of 1, its place scores random."""
    fmt = problem_format(**settings)
    cfg = transformer_config(
        vocab_size=tokenizer_for(fmt).vocab_size, block_size=fmt.seq_len, d_model=32, n_heads=4, n_layers=2,
        place_embedding=True, place_vectors=False, position_embedding=False, place_of="stepped", place_bias=1,
        place_window=True,
    )  # fmt: skip
    return random_place_scores(build_transformer(cfg, fmt)).eval(), fmt


def test_a_token_carries_its_role_beside_the_anchored_place_and_the_roles_do_not_grow_with_the_width():
    fmt = problem_format(**N_BY_2)
    roles, places = split_roles(torch.tensor(place_ids(fmt, "stepped")))
    assert places.tolist() == place_ids(fmt, "anchored")  # the places are anchored's
    named = {p.short: r for p, r in zip(positions(fmt), roles.tolist(), strict=True)}
    assert (named["a3"], named["b0"], named["q0"]) == tuple(map(ROLES.index, ("a", "b", "quotient")))
    steps = [r for p, r in zip(positions(fmt), roles.tolist(), strict=True) if p.kind == "work"]
    assert steps == [STEP_ROLES, STEP_ROLES + 1, STEP_ROLES + 2] * 4  # the quotient digit, the remainder's two
    assert set(role_ids(fmt.at_width(300))) == set(role_ids(fmt))
    net, _ = stepped_net()
    narrow = fmt.at_width(2)  # a training batch's narrower width: its places as they are, never shifted
    batch = torch.zeros(8, narrow.seq_len, dtype=torch.int64)
    assert torch.equal(net.places.training_places(batch, fmt, narrow), place_tensor(narrow, "stepped", batch.device))


def test_a_step_computes_the_same_at_any_length():
    """A 20-digit division and the same one written 300 wide (280 leading zeros, each step 0 r 0): every token of
    the working is predicted alike -- nothing a step reads grows with the width."""
    net, fmt = stepped_net()
    tok = tokenizer_for(fmt)
    logits = {}
    for width in (20, 300):
        wide = fmt.at_width(width)
        a, b = 73_021_998_400_516_278_345, 57
        ids = torch.tensor([tok.encode(prompt_text(wide, a, "/", b) + written_text(wide, a, "/", b), bos=True)])
        work = [i for i, p in enumerate(positions(wide)) if p.kind == "work"][-3 * 17 :]  # the last 17 steps (the
        # first three see, over two layers, the '=' before step 0), each digit predicted by the token before it
        with torch.no_grad():
            logits[width] = net(ids, places=place_tensor(wide, "stepped", ids.device))[0][0, [i - 1 for i in work]]
    torch.testing.assert_close(logits[20], logits[300], rtol=0, atol=1e-5)


def test_without_roles_the_remainder_and_the_brought_down_digit_cannot_be_told_apart():
    """The reason for the roles: under place_of=anchored, a step's remainder digit and the digit of a it brings
    down are keys of one place difference from the query writing the quotient digit, and the same token id."""
    fmt = problem_format(**N_BY_2)
    layout, anchored, stepped = positions(fmt), place_ids(fmt, "anchored"), place_ids(fmt, "stepped")
    a_digit = next(i for i, p in enumerate(layout) if p.short == "a2")  # step 1 brings it down
    remainder = next(i for i, p in enumerate(layout) if p.kind == "work" and p.line == 0) + 2  # step 0's last
    assert anchored[a_digit] == anchored[remainder]  # the query at `remainder` writes step 1's quotient digit
    assert stepped[a_digit] != stepped[remainder]


def test_stepped_places_need_long_division_with_a_short_divisor():
    for settings in ({**N_BY_2, "b_digits": 0}, {**N_BY_2, "show_work": False}):
        with pytest.raises(ValueError, match="place_of=stepped needs long division's steps with a short divisor"):
            stepped_net(settings)
    with pytest.raises(ValueError, match="place_of=stepped needs place_vectors=false"):
        transformer_config(vocab_size=18, block_size=8, place_embedding=True, place_of="stepped", place_bias=1)


def test_the_length_analysis_asks_the_hard_divisions_first_and_never_a_zero_divisor():
    for width, b_digits in ((1, 1), (9, 1), (100, 1), (100, 2)):
        problems = long_problems("/", width, 60, b_digits=b_digits)
        assert len(problems) == 60 and all(len(str(p.a)) == width and 0 < p.b < 10**b_digits for p in problems)
        firsts = [(p.a, p.b) for p in problems[:8]]
        assert (10**width - 1, 7) in firsts and any(a % b == 0 for a, b in firsts)  # all nines by 7, a multiple
    assert (99 * "9", 99) in [(str(p.a), p.b) for p in long_problems("/", 99, 10, b_digits=2)]
    assert any(p.a < p.b for p in long_problems("/", 2, 10, b_digits=2))  # smaller than its divisor


def test_experiment_div_n1_builds_a_model_with_no_table_that_asks_long_divisions(tmp_path):
    from model.calculator import Calculator
    from tests.conftest import compose_config, with_run_dir
    from training.assemble import build_objects

    datamodule, module, _, _ = build_objects(with_run_dir(compose_config(["experiment=div_n1"]), tmp_path))
    assert module.net.cfg.places.place_of == "stepped" and not module.net.has_table
    calc = Calculator(module.net, module.fmt, tokenizer_for(module.fmt))
    assert calc.longest >= 1000 and module.fmt == datamodule.fmt and module.fmt.digits == 9
