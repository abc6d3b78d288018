"""Division with remainder: ``a/b`` answered with its quotient and remainder (data/problems.py), long division's
steps before them (data.show_work: data/long_division.py), the token '/' only for a model that divides, never a
division by zero drawn, and ``q r R`` wherever a result is shown."""

from __future__ import annotations

import pytest
import torch

from data.build import format_dict, problem_format
from data.difficulty import difficulty, long_difficulty
from data.division import DividingFormat, tokenizer_for
from data.expressions import ExpressionError, parse_expression
from data.long_division import LongDivision
from data.positions import positions
from data.problems import ProblemEncoder, ProblemFormat
from data.quotient import Quotient
from data.sampler import ProblemSampler
from data.text import evaluate, parse_answer, prompt_text, written_text
from data.tokenizer import CharTokenizer

DIV3 = {"digits": 3, "operators": "/", "b_digits": 2, "show_work": True, "reverse_answer": False}
EDGES = [(999, 7), (999, 99), (999, 9), (700, 7), (990, 99), (5, 99), (0, 1), (0, 13), (100, 1), (1, 2), (98, 99)]


def test_a_division_is_answered_with_its_quotient_and_remainder_as_one_number_in_the_formats_order():
    fmt = DividingFormat(3, "/", reverse_answer=False)
    assert evaluate(17, "/", 5) == Quotient(3, 2) and str(Quotient(3, 2)) == "3 r 2"
    assert str(evaluate(12, "/", 4)) == "3 r 0"
    assert prompt_text(fmt, 17, "/", 5) + written_text(fmt, 17, "/", 5) == "017/005=003002" and fmt.answer_len == 6
    mixed = DividingFormat(2, "+-*/")  # reversed and signed, as every answer of the format: 0302 -> 2030, then +
    assert written_text(mixed, 17, "/", 5) == "2030+" and written_text(mixed, 17, "+", 5) == "2200+"
    assert parse_answer(mixed, "2030+", "/") == Quotient(3, 2) and parse_answer(fmt, "003002") == Quotient(3, 2)
    for unsigned in ("2030-", "0000-", "20300"):  # a '-', even before zeros, or no sign: no quotient
        with pytest.raises(ValueError, match="not a quotient"):
            parse_answer(mixed, unsigned, "/")
    with pytest.raises(ValueError, match="operators='/'"):
        ProblemFormat(3, "/")  # the lesson's format knows the lesson's three; data/build.py builds the one that divides
    assert type(problem_format(digits=3, operators="+")) is ProblemFormat


@pytest.mark.parametrize(
    "settings", [{"digits": 3, "operators": "/"}, DIV3, {"digits": 2, "operators": "+-*/", "show_work": True}]
)
def test_the_encoders_tokens_are_the_text_of_every_problem_edge_cases_included(settings):
    fmt = problem_format(**settings)
    tokenizer = tokenizer_for(fmt)
    a, op_idx, b = fmt.random_problems(400, torch.Generator().manual_seed(0))
    divides = op_idx == fmt.operators.index("/")
    edges = [(x % 10**fmt.digits, y % 10 ** min(fmt.digits, 2) or 1) for x, y in EDGES]
    a = torch.cat([a, torch.tensor([x for x, _ in edges])])
    b = torch.cat([b, torch.tensor([y for _, y in edges])])
    op_idx = torch.cat([op_idx, torch.full((len(edges),), fmt.operators.index("/"))])
    assert bool((b[torch.cat([divides, torch.ones(len(edges), dtype=torch.bool)])] > 0).all())
    seqs = ProblemEncoder(fmt, tokenizer.vocab).encode(a, op_idx, b)
    for seq, x, o, y in zip(seqs.tolist(), a.tolist(), op_idx.tolist(), b.tolist(), strict=True):
        op = fmt.operators[o]
        text = prompt_text(fmt, x, op, y) + written_text(fmt, x, op, y)
        assert seq == tokenizer.encode(text, bos=True, eos=True), text
        assert parse_answer(fmt, written_text(fmt, x, op, y), op) == evaluate(x, op, y)


def test_long_divisions_steps_bring_down_one_digit_each_and_end_on_the_result():
    fmt = problem_format(**DIV3)
    assert isinstance(fmt.working, LongDivision) and fmt.work_len == 3 * (1 + 2)
    # 2 / 17 = 0 r 2; 28 / 17 = 1 r 11; 114 / 17 = 6 r 12; then 16 r 12
    assert written_text(fmt, 284, "/", 17) == "002" + "111" + "612" + "016012"
    long = fmt.at_width(300)  # any length, in Python's ints
    a = int("9" * 300)
    text = written_text(long, a, "/", 7)
    assert parse_answer(long, text, "/") == Quotient(*divmod(a, 7)) and len(text) == long.answer_len
    assert [p.short for p in positions(fmt)][9:18] == ["w0.2"] * 3 + ["w1.1"] * 3 + ["w2.0"] * 3
    assert [p.short for p in positions(fmt)][18:24] == ["q2", "q1", "q0", "R2", "R1", "R0"]
    assert format_dict(fmt)["b_digits"] == 2 and isinstance(problem_format(**format_dict(fmt)).working, LongDivision)
    with pytest.raises(ValueError, match="only divides"):
        problem_format(digits=2, operators="+/", show_work=True)


def test_no_division_by_zero_is_ever_drawn_and_the_space_counts_none():
    fmt = problem_format(digits=2, operators="/", b_digits=1)
    a, op_idx, b = fmt.random_problems(20_000, torch.Generator().manual_seed(1))
    assert int(b.min()) == 1 and int(b.max()) == 9  # b in 1..9, uniform: each about 1/9
    assert torch.bincount(b, minlength=10)[1:].float().div(20_000).sub(1 / 9).abs().max() < 0.01
    whole = DividingFormat(2, "+/")
    a, op_idx, b = whole.all_problems()
    assert len(a) == whole.n_problems == 2 * 100 * 100 - 100 and not bool(((op_idx == 1) & (b == 0)).any())
    held_out = ProblemSampler(whole, 0.05, 0.05).sample("test", 500, torch.Generator().manual_seed(0))
    assert not bool(((held_out[1] == 1) & (held_out[2] == 0)).any())


def test_the_token_slash_is_only_a_dividing_models_and_every_other_id_stays():
    plain, divides = CharTokenizer(), tokenizer_for(DividingFormat(3, "/"))
    assert plain.vocab_size == 17 and divides.vocab_size == 18 and divides.vocab["/"] == 17
    assert all(divides.vocab[t] == i for t, i in plain.vocab.items())
    assert tokenizer_for(ProblemFormat(3, "+-*")).to_json() == plain.to_json()  # every earlier run's tokenizer.json
    with pytest.raises(ValueError, match=r"knows digits 0-9, '\+', '-', '\*' and '='"):
        plain.encode("1/2")
    assert (
        divides.encode("12/3") == [divides.vocab[c] for c in "12/3"] and divides.decode(divides.encode("1/2")) == "1/2"
    )


def test_expressions_divide_and_a_zero_divisor_is_one_line():
    fmt = problem_format(**DIV3)
    assert parse_expression("17 / 5", fmt).truth == Quotient(3, 2)
    assert parse_expression("17/5 = 3 r 2", fmt, allow_answer=True).given == Quotient(3, 2)
    for text, said in [
        ("17/0", "division by zero"),
        ("17/5 = 3 r 1", "the given answer 3 r 1 is wrong: 17/5 = 3 r 2"),
        ("17/5 = 3", "must be a quotient and remainder"),
        ("17/123", "divides by numbers of at most 2"),
        ("17÷5", "write '/' for division"),
        ("17+5", r"not trained on '\+'"),
    ]:
        with pytest.raises(ExpressionError, match=said) as e:
            parse_expression(text, fmt, allow_answer=True)
        assert "\n" not in str(e.value)
    with pytest.raises(ExpressionError, match=r"not trained on '/'"):
        parse_expression("17/5", ProblemFormat(3, "+"))


def test_a_divisions_difficulty_counts_its_nonzero_quotient_digits_at_any_length():
    fmt = DividingFormat(3, "+/")
    a, op_idx, b = fmt.random_problems(500, torch.Generator().manual_seed(2))
    scores = difficulty(fmt, a, op_idx, b).tolist()
    for x, o, y, score in zip(a.tolist(), op_idx.tolist(), b.tolist(), scores, strict=True):
        assert score == long_difficulty(fmt.operators[o], x, y)
    assert (
        long_difficulty("/", 999, 7) == 3 and long_difficulty("/", 5, 99) == 0 and long_difficulty("/", 10**40, 3) == 40
    )


def test_hard_division_cases_are_the_steps_that_sit_next_to_a_multiple_of_the_divisor():
    """Hard-case sampling draws divisions by their tight steps (a partial dividend within two below a multiple of b,
    or within one past a multiple it reached), div3's commonest mistake; eval's splits keep the quotient digits."""
    from data.difficulty import HardCases, rule_of
    from data.quotient import tight_division_steps

    def on_paper(x: int, y: int) -> int:
        left = count = 0
        for digit in f"{x:03d}":
            partial = left * 10 + int(digit)
            left = partial % y
            count += y > 2 and (left >= y - 2 or (left <= 1 and partial >= y))
        return count

    sampler = ProblemSampler(problem_format(**DIV3))
    a, op_idx, b = sampler.sample("train", 2000, torch.Generator().manual_seed(0))
    assert tight_division_steps(a, b, 3).tolist() == [
        on_paper(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)
    ]
    assert [on_paper(x, y) for x, y in ((455, 57), (999, 7), (114, 57), (284, 17), (17, 5))] == [1, 2, 1, 0, 0]
    assert rule_of("/", hard=True) is tight_division_steps and rule_of("/") is not tight_division_steps
    hard = HardCases(sampler, share=1.0, fade_steps=100)
    drawn = hard.sample(2000, torch.Generator().manual_seed(1))
    uniform, tight = (tight_division_steps(x, y, 3).float().mean() for x, _, y in ((a, op_idx, b), drawn))
    assert tight > uniform + 0.5, (tight, uniform)
