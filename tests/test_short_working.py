"""The working of a long number times a short one (data.show_work with data.b_digits >= 2): its lines a * b_j
before the product, the same in tokens and in text at any width, saved with the checkpoint's format, and b held to
the digits the working has lines for."""

from __future__ import annotations

import pytest
import torch

from data.build import format_dict, problem_format
from data.expressions import ExpressionError, parse_expression
from data.positions import place_tensor, top_place
from data.problems import ProblemEncoder
from data.short_working import ShortWorking, b_limit
from data.text import parse_answer, prompt_text, written_text
from data.tokenizer import CharTokenizer

N2 = {"digits": 5, "operators": "*", "show_work": True, "b_digits": 2, "mixed_lengths": True}


def test_the_working_is_a_times_each_of_bs_digits_above_its_units_then_the_product():
    fmt = problem_format(**N2)
    # the line 31415 * 2 = 62830 (b's tens), then 31415 * 27 = 848205, each 10 digits wide and written units first
    assert written_text(fmt, 31415, "*", 27) == "0382600000+" + "5028480000"
    three = problem_format(**{**N2, "b_digits": 3})
    lines = written_text(three, 31415, "*", 927).split("+")  # a * 2, a * 9, then the product
    assert [int(line[::-1]) for line in lines] == [31415 * 2, 31415 * 9, 31415 * 927]
    assert parse_answer(three, written_text(three, 31415, "*", 927)) == 31415 * 927  # the result after the lines


@pytest.mark.parametrize("b_digits", [2, 3])
def test_the_encoders_tokens_are_the_text_of_every_problem(b_digits):
    fmt, tokenizer = problem_format(**{**N2, "b_digits": b_digits}), CharTokenizer()
    a, op_idx, b = fmt.random_problems(300, torch.Generator().manual_seed(0))
    assert int(b.max()) < 10**b_digits and len(str(int(a.max()))) == 5
    seqs = ProblemEncoder(fmt, tokenizer.vocab).encode(a, op_idx, b)
    for seq, x, y in zip(seqs.tolist(), a.tolist(), b.tolist(), strict=True):
        text = prompt_text(fmt, x, "*", y) + written_text(fmt, x, "*", y)
        assert seq == tokenizer.encode(text, bos=True, eos=True)


def test_a_long_problem_is_written_in_unbounded_ints():
    fmt = problem_format(**N2).at_width(400)
    a = int("7" * 400)
    line, product = written_text(fmt, a, "*", 89).split("+")
    assert int(line[::-1]) == a * 8 and int(product[::-1]) == a * 89 and len(line) == fmt.answer_digits


def test_the_checkpoints_format_rebuilds_the_working_and_the_short_b():
    fmt = problem_format(**N2)
    saved = format_dict(fmt)
    assert saved["b_digits"] == 2 and "b_digits" not in format_dict(problem_format(digits=5, operators="*"))
    again = problem_format(**saved)
    assert isinstance(again.working, ShortWorking) and b_limit(again) == 2 and again.seq_len == fmt.seq_len


def test_formats_alike_but_for_their_working_get_their_own_places():
    """ProblemFormat's equality does not see the working, so the cached places are kept per layout."""
    mul = problem_format(digits=3, operators="*", show_work=True)  # long multiplication's 4 lines
    short = problem_format(digits=3, operators="*", show_work=True, b_digits=2)  # one line
    assert mul == short and mul.seq_len != short.seq_len
    for fmt in (mul, short, mul):
        assert len(place_tensor(fmt, "anchored", torch.device("cpu"))) == fmt.seq_len
    assert top_place(mul, "predicted") == top_place(short, "predicted") == 6  # the 6-digit answer's places 0..5, + 1


def test_the_working_is_checked_and_b_held_to_its_lines():
    with pytest.raises(ValueError, match="needs operators='\\*' and b_digits >= 2"):
        problem_format(**{**N2, "b_digits": 1})
    with pytest.raises(ValueError, match="needs operators='\\*'"):
        problem_format(**{**N2, "operators": "+*"})
    fmt = problem_format(**N2)
    assert parse_expression("123*45", fmt).b == 45
    with pytest.raises(ExpressionError, match="456 has 3 digits; this model multiplies by numbers of at most 2"):
        parse_expression("123*456", fmt)


def test_experiment_mul_n2_trains_on_the_working_with_b_anchored(tmp_path):
    from tests.conftest import compose_config, with_run_dir
    from training.assemble import build_objects

    datamodule, module, _, _ = build_objects(with_run_dir(compose_config(["experiment=mul_n2"]), tmp_path))
    assert isinstance(module.fmt.working, ShortWorking) and b_limit(module.fmt) == 2
    assert module.hparams["fmt"]["b_digits"] == 2  # saved with the checkpoint
    assert module.net.cfg.places.place_of == "anchored" and not module.net.has_table
