"""Sums of many operands (data.operands, data/sums.py): the running sum's lines in tokens and in text, splits that are
a function of the operands, a line that sees its own operand and the line before however many there are, the settings
checked, and calc.py's expressions."""

from __future__ import annotations

import pytest
import torch

from analysis.sum_length import carry_heavy, sum_problems
from data.build import format_dict, problem_format
from data.expressions import ExpressionError, parse_expression
from data.positions import LINE_STRIDE, line_ids, place_ids, positions
from data.sums import SumEncoder, SumFormat, SumProblem, SumSampler, sum_text
from data.text import parse_answer
from data.tokenizer import CharTokenizer
from tests.test_running_product import index_of, lined_net

SUMS = {"digits": 4, "operands": 5, "show_work": True, "mixed_lengths": True}


def test_each_line_is_the_sum_so_far_and_the_last_is_the_result():
    fmt = problem_format(**{**SUMS, "digits": 2, "operands": 3})
    assert sum_text(fmt, [12, 34, 5]) == "012+034+005=" + "210+" + "640+" + "150"  # 12, 46, 51: units first
    written = sum_text(fmt, [12, 34, 5]).split("=")[1]
    assert parse_answer(fmt, written) == 51 and len(written) == fmt.answer_len


def test_the_encoders_tokens_are_the_text_of_every_sum():
    tokenizer = CharTokenizer()
    for fmt in (problem_format(**SUMS), problem_format(**SUMS).at_width(2), SumFormat(3, 12, reverse_answer=False)):
        (operands,) = fmt.random_problems(200, torch.Generator().manual_seed(0))
        seqs = SumEncoder(fmt, tokenizer.vocab).encode(operands)
        assert seqs.shape == (200, fmt.seq_len) and len(positions(fmt)) == fmt.seq_len
        for seq, row in zip(seqs.tolist(), operands.tolist(), strict=True):
            assert seq == tokenizer.encode(sum_text(fmt, row), bos=True, eos=True)
        lengths = {len(str(x)) for x in operands.flatten().tolist()}
        assert lengths == set(range(1, fmt.digits + 1))  # operands of every length


def test_a_long_sum_is_written_in_unbounded_ints():
    fmt = problem_format(**SUMS).shaped(30, 30)
    operands = [int("9" * 30)] * 30
    lines = sum_text(fmt, operands).split("=")[1].split("+")
    assert [int(line[::-1]) for line in lines] == [x * int("9" * 30) for x in range(1, 31)]
    assert len(lines[0]) == 32  # 30 x (10**30 - 1) has 32 digits
    assert sum_text(fmt, operands).startswith("00" + "9" * 30 + "+")  # every number as wide as the result


def test_splits_are_a_function_of_the_operands_and_held_out_sets_are_distinct():
    fmt = problem_format(**{**SUMS, "digits": 2, "operands": 3})
    sampler = SumSampler(fmt, 0.1, 0.1)
    (val,) = sampler.sample("val", 300, torch.Generator().manual_seed(1))
    (train,) = sampler.sample("train", 3000, torch.Generator().manual_seed(2))
    assert len({tuple(r) for r in val.tolist()}) == 300
    assert (fmt.split_of(val, 0.1, 0.1) == 1).all() and (fmt.split_of(train, 0.1, 0.1) == 0).all()
    assert not {tuple(r) for r in val.tolist()} & {tuple(r) for r in train.tolist()}
    swapped = val[:, [1, 0, 2]]  # the same numbers in another order: another problem, hashed as such
    assert not torch.equal(fmt.split_of(swapped, 0.1, 0.1), fmt.split_of(val, 0.1, 0.1))


def test_a_width_is_as_many_operands_in_proportion_and_one_length():
    fmt = problem_format(**{**SUMS, "digits": 10, "operands": 10})
    assert fmt.at_width(10) == fmt and fmt.at_width(1).terms == 2 and fmt.at_width(7).terms == 7
    lengths = [fmt.at_width(w).seq_len for w in range(1, 11)]
    assert lengths == sorted(set(lengths))  # mixed-width training tells a batch's width by its length


def test_operand_j_and_its_plus_sit_on_line_minus_j_seen_from_line_j_alone():
    fmt = problem_format(**{**SUMS, "digits": 2, "operands": 3})
    layout, lines = positions(fmt), line_ids(fmt)
    terms = [(p.short, line) for p, line in zip(layout, lines, strict=True) if p.kind == "term"]
    assert terms[:4] == [("t1.2", -1), ("t1.1", -1), ("t1.0", -1), ("t2.2", -2)]  # seen from line j alone
    assert [line for p, line in zip(layout, lines, strict=True) if p.kind == "op"] == [-1, -2]  # the '+' after it
    assert [line for p, line in zip(layout, lines, strict=True) if p.kind in ("=", "then")] == [1, 2, 3]
    ids = place_ids(fmt, "lined")
    assert all(i // LINE_STRIDE == line for i, line in zip(ids, lines, strict=True))
    assert [i % LINE_STRIDE for i, p in zip(ids, layout, strict=True) if p.kind == "term"][:3] == [3, 2, 1]  # places


def test_a_line_of_a_long_sum_sees_its_operand_and_the_line_before_only():
    fmt = problem_format(**SUMS)
    net = lined_net(fmt)
    long = fmt.shaped(30, 20)
    table = net.places.place_score_table(long.seq_len, long.seq_len, torch.tensor(place_ids(long, "lined")))
    at = lambda kind, place, line=None: index_of(positions(long), kind, place, line)  # noqa: E731
    q = at("work", 9, 17)  # predicts line 17's digit at place 10: operand 17 is the one that line adds
    assert line_ids(long)[q] == 17
    seen = lambda k: bool(torch.isfinite(table[..., q, k]).all())  # noqa: E731
    assert seen(at("term", 10, 17)) and seen(at("term", 9, 17)) and not seen(at("term", 10, 18))
    assert not seen(at("term", 10, 16))  # the operand of the line before: seen from its own line alone
    assert seen(at("work", 10, 16)) and not seen(at("work", 10, 15))  # the line before; not two lines up
    assert not seen(at("term", 10, 5)) and not seen(at("term", 2, 17))  # another operand; a far column


def test_the_format_saves_its_operands_and_its_settings_are_checked():
    fmt = problem_format(**SUMS)
    assert format_dict(fmt)["operands"] == 5 and problem_format(**format_dict(fmt)) == fmt
    assert problem_format(digits=4, operands=5) == fmt  # a sum is always written so: a op b's settings not needed
    for bad, why in (
        ({"operators": "*"}, "set operators='\\+'"),
        ({"b_digits": 2}, "b_digits is for a op b"),
        ({"operands": 1}, "operands=1: must be a whole number >= 2"),
        ({"operands": "many"}, "operands='many'"),
    ):
        with pytest.raises(ValueError, match=why):
            problem_format(**{**SUMS, **bad})
    SumFormat(17, 10).check_vectorised()  # ten 17-digit numbers sum below 10**18: int64 holds them
    with pytest.raises(ValueError, match="digits=18: at most 17 with 10 operands"):
        SumFormat(18, 10).check_vectorised()


def test_calc_reads_a_sum_of_any_length_and_says_what_it_takes():
    fmt = problem_format(**SUMS)
    assert parse_expression(" 12 + 345+6789 = ", fmt) == SumProblem((12, 345, 6789))
    assert parse_expression("1+2+3=6", fmt, allow_answer=True).given == 6
    problem = parse_expression("+".join(["9" * 40] * 30), fmt, longest=10_000)
    assert problem.layout(fmt) == fmt.shaped(30, 40) and problem.truth == 30 * int("9" * 40)
    for text, why in (("1*2+3", "not trained on '\\*'"), ("1+2=4", "answer 4 is wrong"), ("1++2", "in a row")):
        with pytest.raises(ExpressionError, match=why):
            parse_expression(text, fmt, allow_answer=True)
    with pytest.raises(ExpressionError, match="accepted: a\\+b\\+c"):
        parse_expression("1+2", fmt, allow_answer=False, longest=None) and parse_expression("1 2", fmt)


def test_carry_heavy_sums_carry_across_the_whole_width_on_every_other_line():
    for operands in carry_heavy(6, 8, 20):
        assert all(len(str(x)) == 8 for x in operands)
        assert SumProblem(tuple(operands)).carries() >= 3 * 8  # lines 2, 4, 6 carry through all 8 places
    uniform = sum_problems(6, 20)["uniform"]
    assert sum(p.carries() for p in uniform) < sum(SumProblem(tuple(o)).carries() for o in carry_heavy(6, 8, 10))


def test_experiment_sum_many_trains_on_the_running_sum_with_lines(tmp_path):
    from tests.conftest import compose_config, with_run_dir
    from training.assemble import build_objects

    datamodule, module, analysis, _ = build_objects(with_run_dir(compose_config(["experiment=sum_many"]), tmp_path))
    assert isinstance(module.fmt, SumFormat) and module.hparams["fmt"]["operands"] == 10
    assert module.net.cfg.places.place_of == "lined" and not module.net.has_table and analysis is None
    batch = next(iter(datamodule.train_dataloader()))  # a width of 1..10, its operands in proportion
    layout = module.layout(batch)
    assert isinstance(layout, SumFormat) and batch.shape[1] == layout.seq_len
    loss = module.teacher_forced_loss(batch, module.training_places(batch))
    assert torch.isfinite(loss)


def test_a_run_of_sums_is_asked_and_scored_by_calc_and_its_page_says_what_the_lab_reads(tmp_path):
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT, run_train

    small = ["data.digits=3", "data.operands=3", "data.n_val=50", "data.n_test=50", "trainer.max_steps=5"]
    ran = run_train(tmp_path / "run", "experiment=sum_many", *small, "trainer.val_check_interval=5", "logger=none")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "sums of 3 operands of up to 3 digits" in ran.stdout and "111+222+333" in ran.stdout  # the ask line
    calc = lambda *args, **kw: subprocess.run(  # noqa: E731
        [sys.executable, str(ROOT / "calc.py"), "--ckpt", str(tmp_path / "run"), *args],
        capture_output=True, text=True, cwd=ROOT, timeout=300, **kw,
    )  # fmt: skip
    answered = calc("1+2+3", "12+345+6789+1", "3*4")
    lines = answered.stdout.splitlines()
    assert len(lines) == 3 and lines[2].startswith("error: '3*4': this model was not trained on '*'")
    assert all(line.split()[0].isdigit() or line.startswith("?") for line in lines[:2])  # answers, right or not
    scored = calc("--eval", "-", "--json", input="1+2+3=6\n999+1+1\n# a comment\n7*8\n")
    report = json.loads(scored.stdout)
    assert report["n_problems"] == 2 and report["n_invalid"] == 1 and "by_carries" in report
    refused = subprocess.run(
        [sys.executable, str(ROOT / "analyse.py"), str(tmp_path / "run")], capture_output=True, text=True, cwd=ROOT
    )
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "read a op b problems" in refused.stderr
    assert "the lab asks a op b problems" in (tmp_path / "run" / "report.html").read_text()
