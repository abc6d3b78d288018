"""A long number times a long one (data.running_product, model.place_of=lined): the working's lines are the running
product of a and b's top digits, the same in tokens and in text at any width, and a line sees, of the working, only
itself, the line before and its own digit of b, however many lines there are."""

from __future__ import annotations

import pytest
import torch

from data.build import format_dict, problem_format
from data.positions import LINE_STRIDE, line_ids, place_ids, place_tensor, positions
from data.problems import ProblemEncoder
from data.running_product import RunningProduct
from data.text import parse_answer, prompt_text, written_text
from data.tokenizer import CharTokenizer
from model.build import build_transformer, transformer_config
from tests.test_length import random_place_scores

NM = {"digits": 4, "operators": "*", "show_work": True, "running_product": True, "mixed_lengths": True}


def test_each_line_is_a_times_bs_top_digits_and_the_last_is_the_product():
    fmt = problem_format(**{**NM, "digits": 3})
    assert written_text(fmt, 123, "*", 456) == "294000+" + "535500+" + "880650"  # 492, 5535, 56088 units first
    written = written_text(fmt, 123, "*", 456)
    assert parse_answer(fmt, written) == 123 * 456
    one = problem_format(**{**NM, "digits": 1})
    assert written_text(one, 7, "*", 8) == "65"  # one digit of b: no line before the product


def test_the_encoders_tokens_are_the_text_of_every_problem():
    fmt, tokenizer = problem_format(**NM), CharTokenizer()
    a, op_idx, b = fmt.random_problems(300, torch.Generator().manual_seed(0))
    seqs = ProblemEncoder(fmt, tokenizer.vocab).encode(a, op_idx, b)
    for seq, x, y in zip(seqs.tolist(), a.tolist(), b.tolist(), strict=True):
        assert seq == tokenizer.encode(prompt_text(fmt, x, "*", y) + written_text(fmt, x, "*", y), bos=True, eos=True)


def test_a_long_problem_is_written_in_unbounded_ints():
    fmt = problem_format(**NM).at_width(30)
    a, b = int("9" * 30), int("8" * 29 + "7")
    lines = written_text(fmt, a, "*", b).split("+")
    assert [int(line[::-1]) for line in lines] == [a * (b // 10 ** (29 - i)) for i in range(30)]


def test_the_format_saves_its_working_and_its_settings_are_checked():
    fmt = problem_format(**NM)
    assert format_dict(fmt)["running_product"] is True
    assert isinstance(problem_format(**format_dict(fmt)).working, RunningProduct)
    for bad in ({"show_work": False}, {"b_digits": 2}, {"running_product": "yes"}):
        with pytest.raises(ValueError, match="running_product="):
            problem_format(**{**NM, **bad})
    with pytest.raises(ValueError, match="running_product=true with operators='\\+\\*'"):
        problem_format(**{**NM, "operators": "+*"})


def test_lines_are_counted_from_the_first_and_b_digits_sit_on_the_line_they_multiply():
    fmt = problem_format(**{**NM, "digits": 3})
    shown = [(p.short, line) for p, line in zip(positions(fmt), line_ids(fmt), strict=True) if line]
    assert shown[:4] == [("b2", 1), ("b1", 2), ("b0", 3), ("=", 1)]  # b's top digit: the first line's multiplier
    then = [line for p, line in zip(positions(fmt), line_ids(fmt), strict=True) if p.kind == "then"]
    assert then == [2, 3]  # a line's '+' predicts the next line's first digit
    ids = place_ids(fmt, "lined")
    assert all(i // LINE_STRIDE == line for i, line in zip(ids, line_ids(fmt), strict=True))
    assert [i % LINE_STRIDE for i, p in zip(ids, positions(fmt), strict=True) if p.kind == "b"] == [0, 0, 0]


def test_with_line_end_sees_next_a_lines_last_digit_sits_on_the_next_line_and_reads_bs_next_digit():
    old = problem_format(**{**NM, "digits": 3})  # as checkpoints before line_end_sees_next load: unchanged
    fmt = problem_format(**{**NM, "digits": 3, "line_end_sees_next": True})
    assert format_dict(fmt)["line_end_sees_next"] is True and "line_end_sees_next" not in format_dict(old)
    assert problem_format(**format_dict(fmt)).working.line_end_sees_next
    layout, before, after = positions(fmt), line_ids(old), line_ids(fmt)
    moved = [i for i in range(len(layout)) if before[i] != after[i]]
    ends = [i for i in range(len(layout) - 1) if layout[i + 1].kind in ("then", "eos")]
    assert moved == ends and len(ends) == 3  # each line's last digit ('+', '+', [EOS] next), one line on
    assert all(after[i] == before[i] + 1 for i in moved)
    assert place_ids(fmt, "lined") != place_ids(old, "lined")  # and their cached place tensors are told apart
    cpu = torch.device("cpu")
    assert not torch.equal(place_tensor(fmt, "lined", cpu), place_tensor(old, "lined", cpu))
    net, layout = lined_net(fmt), positions(fmt.at_width(12))
    q = next(i for i in range(len(layout) - 1) if layout[i + 1].kind == "then")  # line 1's end, predicting its '+'
    b_next = index_of(layout, "b", 10)  # b's second digit from the top: line 2's multiplier

    def sees_b_next(f) -> bool:
        long = f.at_width(12)
        table = net.places.place_score_table(long.seq_len, long.seq_len, torch.tensor(place_ids(long, "lined")))
        return bool(torch.isfinite(table[..., q, b_next]).all())

    assert sees_b_next(fmt) and not sees_b_next(old)
    for bad in ({"line_end_sees_next": "yes"}, {"running_product": False, "line_end_sees_next": True}):
        with pytest.raises(ValueError, match="line_end_sees_next="):
            problem_format(**{**NM, **bad})


def index_of(layout: list, kind: str, place: int, line: int | None = None) -> int:
    """Where in ``layout`` (data/positions.py's positions) the digit of this kind, place and line sits."""
    return next(
        i for i, p in enumerate(layout) if p.kind == kind and p.place == place and (line is None or p.line == line)
    )


def lined_net(fmt):
    """A small network of experiment=mul_nm's and sum_many's scheme for ``fmt``, its place scores made to count."""
    cfg = transformer_config(
        vocab_size=CharTokenizer().vocab_size, block_size=fmt.seq_len, d_model=32, n_heads=4, n_layers=2,
        place_embedding=True, place_vectors=False, position_embedding=False, place_of="lined", place_bias=1,
        place_window=True,
    )  # fmt: skip
    return random_place_scores(build_transformer(cfg, fmt))


def test_a_line_of_a_long_product_sees_the_line_before_and_its_digit_of_b_only():
    fmt = problem_format(**NM)
    net = lined_net(fmt)
    long = fmt.at_width(20)
    places = torch.tensor(place_ids(long, "lined"))
    table = net.places.place_score_table(long.seq_len, long.seq_len, places)  # (L, 1, H, T, T)
    layout, lines = positions(long), line_ids(long)
    at = lambda kind, place, line=None: index_of(layout, kind, place, line)  # noqa: E731
    q = at("work", 10, 14)  # predicts digit 11 of line 15 (work line 14, counted from 0)
    assert lines[q] == 15
    seen = lambda k: bool(torch.isfinite(table[..., q, k]).all())  # noqa: E731
    assert seen(at("work", 10, 13)) and seen(at("work", 9, 13))  # the line before, at its column and the one below
    assert not seen(at("work", 10, 12)) and not seen(at("work", 2, 13))  # two lines up; far columns
    b_mine, b_before = at("b", 20 - 15), at("b", 20 - 14)  # b's digits of lines 15 and 14
    assert seen(b_mine) and seen(b_before) and not seen(at("b", 0))
    assert not torch.equal(table[..., q, b_mine], table[..., q, b_before])  # told apart by their line
    assert seen(at("a", 11)) and seen(at("a", 10)) and not seen(at("a", 2))  # a: its column's window only


def test_lines_need_a_working_written_in_lines():
    fmt = problem_format(digits=3, operators="+")
    with pytest.raises(ValueError, match="place_of=lined needs a working written in lines"):
        build_transformer(
            transformer_config(
                vocab_size=CharTokenizer().vocab_size, block_size=fmt.seq_len, place_embedding=True,
                place_vectors=False, position_embedding=False, place_of="lined", place_bias=1,
            ),
            fmt,
        )  # fmt: skip


def test_experiment_mul_nm_trains_on_the_running_product_with_lines(tmp_path):
    from tests.conftest import compose_config, with_run_dir
    from training.assemble import build_objects

    datamodule, module, _, _ = build_objects(with_run_dir(compose_config(["experiment=mul_nm"]), tmp_path))
    assert isinstance(module.fmt.working, RunningProduct) and module.hparams["fmt"]["running_product"] is True
    assert module.fmt.working.line_end_sees_next and module.hparams["fmt"]["line_end_sees_next"] is True
    assert module.net.cfg.places.place_of == "lined" and not module.net.has_table
