"""Beyond the trained length: mixed lengths and widths in training, places shifted at random, answering any width
a model addresses, the length analysis's bookkeeping, and the 10-digit verification suites (analysis/adderboard.py).

Whether a model really generalises is measured, not tested here: docs/arithmetic.md, python docs/regenerate.py."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import pytest
import torch

from analysis import adderboard
from analysis.metrics.length import accuracy_by_length, length_widths, long_problems, longest_learned, problems_at
from data.build import data_module, data_settings, problem_format
from data.expressions import ExpressionError, Problem, parse_expression
from data.positions import place_ids, positions, randomised, shifted
from data.problems import ProblemFormat
from data.text import prompt_text, written_text
from data.tokenizer import CharTokenizer
from model.build import build_transformer, transformer_config
from model.calculator import ANY_LENGTH, Calculator
from model.transformer import Transformer, TransformerConfig
from tests.conftest import ROOT


def carries_by_column(p: Problem, digits: int = 10) -> list[int]:
    """1 where column i (units first) of p.a + p.b carries out, else 0."""
    out, carry = [], 0
    for i in range(digits):
        carry = int((p.a // 10**i) % 10 + (p.b // 10**i) % 10 + carry >= 10)
        out.append(carry)
    return out


# ---- drawing ----------------------------------------------------------------------------------------------
def test_a_fixed_length_format_draws_exactly_as_before():
    fmt, g1, g2 = problem_format(3, "+"), torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    a, op, b = fmt.random_problems(1000, g1)
    assert torch.equal(a, torch.randint(1000, (1000,), generator=g2))
    assert torch.equal(b, torch.randint(1000, (1000,), generator=g2))
    assert torch.equal(op, torch.randint(1, (1000,), generator=g2))


def test_mixed_lengths_draw_every_operand_length_about_equally_often():
    fmt = problem_format(10, "+", mixed_lengths=True)
    a, _, b = fmt.random_problems(20_000, torch.Generator().manual_seed(0))
    for x in (a, b):
        lengths = torch.tensor([len(str(v)) for v in x.tolist()])
        counts = torch.bincount(lengths, minlength=11)[1:]
        assert counts.min() > 1_700 and counts.max() < 2_300  # 2,000 each expected
        assert int(x.max()) < 10**10 and int(x.min()) >= 0


def test_a_share_of_mixed_lengths_mixes_that_share_of_problems():
    for share, given in ((0.0, False), (1.0, True), (0.5, 0.5)):
        fmt = problem_format(10, "+", mixed_lengths=given)
        assert fmt.mixed_lengths == share
    a, _, b = problem_format(10, "+", mixed_lengths=0.5).random_problems(20_000, torch.Generator().manual_seed(0))
    short = ((a < 10**9) | (b < 10**9)).float().mean().item()
    # uniform operands are short 1 time in 10 each (19% of pairs), mixed ones 9 in 10 (99%): 0.5 * 0.19 + 0.5 * 0.99
    assert abs(short - 0.59) < 0.02
    with pytest.raises(ValueError, match="mixed_lengths=1.5: must be true, false or a share"):
        problem_format(10, "+", mixed_lengths=1.5)


def test_round_numbers_are_runs_of_digits_followed_by_zeros_at_every_place():
    fmt = problem_format(10, "+", round_numbers=0.5)
    a, _, b = fmt.random_problems(20_000, torch.Generator().manual_seed(0))
    assert int(a.max()) < 10**10 and int(b.max()) < 10**10
    texts = [str(x) for x in a.tolist()]
    trailing = torch.tensor([len(t) - len(t.rstrip("0")) for t in texts if t != "0"])
    # uniform operands end in k zeros 1 time in 10^k; round ones in 0..9 zeros, uniformly over their run's length
    assert 0.13 < (trailing >= 3).float().mean().item() < 0.25
    assert (trailing == 9).sum() > 50  # 5000000000-like operands, about 0.5 * 1/10 * 1/10 of them


def test_mixed_widths_train_on_every_width_and_never_on_a_held_out_problem():
    dm = data_module(
        data_settings(
            digits=4, mixed_lengths=True, mixed_widths=True, n_val=50, n_test=50, val_fraction=0.05, test_fraction=0.05
        )
    )
    tokenizer, widths = CharTokenizer(), set()
    for batch in dm.training_stream().draw(0), *(dm.training_stream().draw(i) for i in range(1, 40)):
        fmt = dm.fmt.at_width((batch.shape[-1] - 5) // 3)  # '+': 3 * digits + 5 tokens
        assert fmt.seq_len == batch.shape[-1]
        widths.add(fmt.digits)
        for row in batch[0, :20].tolist():
            a, b = tokenizer.decode(row).split("=")[0].split("+")
            split = dm.fmt.split_of(torch.tensor([int(a)]), torch.tensor([0]), torch.tensor([int(b)]), 0.05, 0.05)
            assert int(split) == 0  # the training split, as at full width
    assert widths == {1, 2, 3, 4}


def test_mixed_widths_refuse_what_they_cannot_draw():
    with pytest.raises(ValueError, match="mixed_widths=true: needs streaming=true"):
        data_module(data_settings(digits=3, mixed_widths=True, streaming=False))


# ---- places -------------------------------------------------------------------------------------------------
def place_net(
    offset: int = 4, place_of: str = "predicted", digits: int = 3, place_bias: int = 0, log_scale: int = 0,
    place_window: bool = False, place_vectors: bool = True,
) -> tuple[Transformer, ProblemFormat]:  # fmt: skip
    torch.manual_seed(0)
    fmt = problem_format(digits, "+")
    longest = fmt.at_width(digits + offset)
    cfg = transformer_config(
        vocab_size=CharTokenizer().vocab_size, block_size=longest.seq_len, d_model=32, n_heads=4,
        place_embedding=True, position_embedding=False, place_offset=offset, place_of=place_of, place_bias=place_bias,
        log_scale=log_scale, place_window=place_window, place_vectors=place_vectors,
    )  # fmt: skip
    return build_transformer(cfg, fmt).eval(), fmt


def test_places_default_to_the_trained_layout_and_shifted_places_change_the_output():
    net, fmt = place_net()
    idx = torch.randint(10, (5, fmt.seq_len - 1))
    places = torch.tensor(place_ids(fmt))
    torch.testing.assert_close(net(idx)[0], net(idx, places=places)[0])
    assert not torch.allclose(net(idx)[0], net(idx, places=shifted(places, torch.full((5,), 2)))[0])
    assert net.places.place_emb.num_embeddings == max(place_ids(fmt)) + 1 + 4  # the trained places and 4 more


def test_shifting_moves_every_digit_and_leaves_the_rest():
    places = torch.tensor([0, 3, 2, 1, 0, 3, 2, 1, 0, 1, 2, 3, 4, 0])
    out = shifted(places, torch.tensor([0, 5]))
    assert torch.equal(out[0], places) and torch.equal(out[1] - places, 5 * (places > 0))


def test_randomised_places_are_sorted_distinct_places_kept_the_same_for_the_same_digit_place():
    places = torch.tensor([0, 3, 2, 1, 0, 3, 2, 1, 0, 1, 2, 3, 4, 0])  # a2 a1 a0 + b2 b1 b0 = answer (4 places)
    torch.manual_seed(0)
    out = randomised(places, 4, 20, 500)  # (500, T)
    assert torch.equal(out == 0, (places == 0).expand_as(out))
    by_place = out[:, [3, 2, 1, 12]]  # places 1, 2, 3, 4 as a0, a1, a2 and the answer's top digit hold them
    assert (by_place[:, 1:] > by_place[:, :-1]).all() and by_place.min() >= 1 and by_place.max() <= 20
    assert torch.equal(out[:, 1:4], out[:, 5:8]) and torch.equal(out[:, 9:12], out[:, [3, 2, 1]])  # a, b, answer
    assert (by_place[:, 3] - by_place[:, 0] > 3).float().mean() > 0.9  # mostly spread, not a contiguous run
    assert len(set(by_place[:, 0].tolist())) > 10  # the lowest place lands anywhere low


def test_random_places_are_given_to_that_share_of_training_sequences():
    from training.load import calculator_module

    net, fmt = place_net(offset=4)
    a_digits = torch.tensor([p.kind == "a" for p in positions(fmt)])

    def spread_share(share: float) -> float:  # how often a's three digits are not three neighbouring places
        cfg = net.cfg.to_dict() | {"random_places": share}
        torch.manual_seed(0)
        places = calculator_module(cfg, fmt.to_dict(), {}).training_places(torch.zeros(8000, fmt.seq_len).long())
        return (places[:, a_digits].diff(dim=1) != -1).any(dim=1).float().mean().item()

    everyone = spread_share(1.0)
    assert spread_share(0.0) == 0 and everyone > 0.5 and spread_share(0.5) == pytest.approx(everyone / 2, abs=0.03)
    with pytest.raises(ValueError, match="random_places=2"):
        transformer_config(**(net.cfg.to_dict() | {"random_places": 2}))


def random_place_scores(net: Transformer) -> Transformer:
    with torch.no_grad():
        net.places.place_scores.weight.normal_(0, 2)  # trained ones are not zero: make them count
    return net


def test_place_scores_start_at_zero_and_then_change_what_the_model_writes():
    net, fmt = place_net(place_bias=2)
    plain, _ = place_net()
    plain.load_state_dict({k: v for k, v in net.state_dict().items() if not k.startswith("places.place_scores")})
    seq = torch.randint(10, (4, fmt.seq_len - 1))
    assert torch.allclose(net(seq)[0], plain(seq)[0], atol=1e-6)  # a zero bias: the same model (another kernel)
    assert not torch.allclose(random_place_scores(net)(seq)[0], plain(seq)[0])


def test_place_scores_are_one_per_place_difference_and_one_for_every_farther_key():
    net, fmt = place_net(place_bias=2, offset=8)
    random_place_scores(net)
    places = torch.tensor([0, 9, 5, 4, 3, 1, 0])  # no place, then places 9, 5, 4, 3, 1
    table = net.places.place_score_table(7, 7, places)  # (layers, 1, heads, 7, 7)
    weight = net.places.place_scores.weight.view(-1, 2, 4)  # (buckets, layers, heads)
    assert torch.equal(table[:, 0, :, 2, 3], weight[2 + 1 + 1])  # 5 - 4 = +1
    assert torch.equal(table[:, 0, :, 3, 1], table[:, 0, :, 5, 1])  # 4 - 9 and 1 - 9: farther below, one bucket
    assert torch.equal(table[:, 0, :, 1, 5], table[:, 0, :, 2, 5])  # 9 - 1 and 5 - 1: farther above, one bucket
    assert torch.equal(table[:, 0, :, 0, 0], table[:, 0, :, 6, 3]) and torch.equal(table[:, 0, :, 6, 3], weight[-1])
    seq = torch.randint(10, (3, fmt.seq_len - 1))
    fused = net(seq)[0]
    explicit, weights = net(seq, need_weights=True)  # the lesson's path, weights materialised
    assert torch.allclose(fused, explicit, atol=1e-5) and torch.allclose(weights[0].sum(-1), torch.ones(1))


def test_a_place_window_hides_every_key_farther_than_its_width_and_nothing_else():
    net, fmt = place_net(place_bias=1, place_window=True, digits=4, offset=0)
    random_place_scores(net)
    places = torch.tensor(place_ids(fmt))  # ^ a3 a2 a1 a0 + b3 b2 b1 b0 = (predicting r0 r1 r2 r3 r4) $
    seq = torch.randint(10, (2, fmt.seq_len - 1))
    logits, weights = net(seq, need_weights=True)
    query, key = places[: fmt.seq_len - 1, None], places[None, : fmt.seq_len - 1]
    far = (key > 0) & ((query == 0) | ((query - key).abs() > 1))  # and no digit seen from '^' or '+'
    assert far.any() and (weights[0][:, :, far] == 0).all() and (weights[1][:, :, far] == 0).all()
    seen = ~far & torch.ones_like(far).tril()  # the causal keys within one place, and the tokens with no place
    assert (weights[0][:, :, seen] > 0).all()
    torch.testing.assert_close(net(seq)[0], logits, atol=1e-5, rtol=1e-5)  # fused = explicit
    # What the query predicting r0 reads cannot depend on a digit three places away: change a3 and b3.
    changed = seq.clone()
    changed[:, [1, 6]] = (changed[:, [1, 6]] + 1) % 10
    r0 = fmt.prompt_len - 1
    torch.testing.assert_close(net(changed)[0][:, r0], logits[:, r0])
    with pytest.raises(ValueError, match="place_window=true needs place_bias"):
        transformer_config(**(net.cfg.to_dict() | {"place_bias": 0}))


@pytest.mark.parametrize("place_window", [False, True])
def test_place_scores_run_under_bf16_autocast(place_window):  # what bf16-mixed does on a GPU, caught on the CPU
    net, fmt = place_net(place_bias=2, place_window=place_window)
    seq = torch.randint(10, (3, fmt.seq_len - 1))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = random_place_scores(net)(seq)[0]
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all()


def test_a_model_with_place_scores_is_refused_by_the_exports_in_one_line():
    from model.calculator import Calculator
    from model.export import ExportError, check_expressible

    for options in ({"place_bias": 2}, {"log_scale": 20}):
        net, fmt = place_net(**options)
        with pytest.raises(ExportError, match="place scores .* or length-scaled queries"):
            check_expressible(Calculator(net, fmt, CharTokenizer()))


def test_log_scale_multiplies_each_querys_scores_by_the_log_of_the_keys_it_sees():
    from model.attention import MultiHeadAttention
    from model.positions import ScoreTerms, query_scale

    torch.manual_seed(0)
    attn = MultiHeadAttention(16, 2)
    x = torch.randn(2, 6, 16)
    scale = query_scale(6, 6, 20)  # what a model with log_scale=20 hands each block
    weights = attn(x, need_weights=True, scores=ScoreTerms(scale=scale))[1]
    factor = torch.log(torch.arange(1, 7) + 1.0) / math.log(20)  # query t sees t + 1 keys
    handle = attn.W_q.register_forward_hook(lambda m, i, out: out * factor[:, None])  # the queries, scaled by hand
    expected = attn(x, need_weights=True)[1]
    handle.remove()
    torch.testing.assert_close(weights, expected)
    terms = ScoreTerms(scale=scale)
    fused, explicit = attn(x, scores=terms)[0], attn(x, need_weights=True, scores=terms)[0]
    torch.testing.assert_close(fused, explicit)
    torch.testing.assert_close(query_scale(2, 6, 20), scale[4:])  # with a cache: the last queries of the sequence
    with pytest.raises(ValueError, match="log_scale=1"):
        transformer_config(vocab_size=17, block_size=8, log_scale=1)


@pytest.mark.parametrize(
    "options",
    [
        {}, {"place_of": "own"}, {"place_bias": 2}, {"log_scale": 20}, {"place_bias": 1, "place_window": True},
        {"place_bias": 1, "place_window": True, "place_vectors": False},
    ],
)  # fmt: skip
def test_decoding_a_longer_problem_with_the_cache_equals_decoding_without(options):
    place_of = options.get("place_of", "predicted")
    net, fmt = place_net(**options)
    if net.cfg.places.place_bias:
        random_place_scores(net)
    wide = fmt.at_width(6)
    prompt = torch.randint(10, (3, wide.prompt_len))
    places = torch.tensor(place_ids(wide, place_of))
    with_cache = net.generate(prompt, wide.answer_len, use_cache=True, places=places)
    assert torch.equal(with_cache, net.generate(prompt, wide.answer_len, use_cache=False, places=places))
    for chunk in (1, 5):  # the prompt into the cache a few tokens at a time: the same answers
        assert torch.equal(with_cache, net.generate(prompt, wide.answer_len, places=places, chunk=chunk))


def windowed_net(digits: int = 3) -> tuple[Transformer, ProblemFormat]:
    """A model whose places only score its attention, in a window of 1 (no place vectors), scores at random."""
    net, fmt = place_net(offset=0, digits=digits, place_bias=1, place_window=True, place_vectors=False)
    random_place_scores(net)
    return net, fmt


def test_places_that_only_score_the_attention_make_no_table_and_see_only_differences():
    net, fmt = windowed_net()
    assert not hasattr(net.places, "place_emb") and not net.has_table
    idx = torch.randint(10, (5, fmt.seq_len - 1))
    places = torch.tensor(place_ids(fmt))
    far = shifted(places, torch.full((5,), 500))  # the same problem 500 places up: the same logits
    torch.testing.assert_close(net(idx, places=far)[0], net(idx)[0])
    calc = Calculator(net, fmt, CharTokenizer())
    assert calc.longest == ANY_LENGTH  # no table: as long as calc.py asks
    with pytest.raises(ValueError, match="place_vectors=false needs place_bias > 0"):
        transformer_config(vocab_size=17, block_size=8, place_embedding=True, place_vectors=False)


def test_a_model_without_a_table_answers_long_problems_in_batches_that_fit():
    net, fmt = windowed_net()
    calc = Calculator(net, fmt, CharTokenizer())
    rows, chunk = calc.batching(fmt.at_width(1000))
    assert rows < calc.batch_size and chunk < fmt.at_width(1000).prompt_len  # a 1,000-digit prompt: in chunks
    assert calc.batching(fmt) == (calc.batch_size, calc.batching(fmt)[1])  # short problems: whole batches
    problems = [Problem(10**149 + 7, "+", 3), Problem(12, "+", 7)]
    answers = calc.answer(problems)
    assert [len(a.text) for a in answers] == [151, 4]  # each answer as wide as its own problem's layout


def test_calc_counts_its_progress_through_long_problems_position_by_position(monkeypatch):
    from contextlib import contextmanager

    import analysis.progress
    import calc as cli

    net, fmt = windowed_net()
    calc, stages = Calculator(net, fmt, CharTokenizer()), []

    @contextmanager
    def stage(what, total=None):
        stages.append({"what": what, "total": total, "done": 0})
        yield type("Stage", (), {"advance": lambda self, n=1: stages[-1].update(done=stages[-1]["done"] + n)})()

    monkeypatch.setattr(analysis.progress, "stage", stage)
    monkeypatch.setattr(cli, "PROGRESS_DIGITS", 6)
    problems = [Problem(1234567, "+", 7), Problem(12, "+", 34), Problem(10**11, "+", 1)]
    with cli.decoding_progress(calc, problems[1:2]):  # short problems: no progress line
        calc.answer(problems[1:2])
    assert stages == []
    with cli.decoding_progress(calc, problems):
        calc.answer(problems)
    widths = (7, 3, 12)  # the first operand's digits, the trained width, 10**11's twelve digits
    (shown,) = stages
    assert shown["what"] == "answering 12-digit problems" and shown["done"] == shown["total"]
    assert shown["total"] == sum(fmt.at_width(w).seq_len - 2 for w in widths)  # every position read once
    assert not net._forward_hooks  # the hook goes with the line


def test_length_widths_are_every_width_to_four_times_trained_then_a_ladder_to_the_longest():
    assert length_widths(10, 40) == list(range(1, 41))  # a model with a place table: every width it addresses
    assert length_widths(10, 1000) == [*range(1, 41), 50, 100, 200, 500, 1000]
    assert length_widths(3, 7) == list(range(1, 8))
    assert [problems_at(w, 500) for w in (100, 200, 500, 1000)] == [500, 500, 100, 50]
    assert length_widths(3, 1000) == [*range(1, 13), 20, 30, 50, 100, 200, 500, 1000]


def test_a_working_that_grows_with_both_operands_is_asked_as_far_as_its_tokens_allow():
    from data.build import problem_format

    fmt = problem_format(digits=9, operators="*", show_work=True, running_product=True)
    tokens = lambda width: fmt.at_width(width).seq_len  # noqa: E731  ~2 * width^2
    widths = length_widths(9, 10_000, tokens)
    assert widths == [*range(1, 19), 20, 30, 50]  # 4x the trained tokens (192) reach 18 digits; 100 x 100: 20,303
    assert problems_at(50, 500, tokens(50)) == 500 * 1205 // tokens(50) < problems_at(20, 500, tokens(20)) == 500
    assert problems_at(1000, 500, 6005) == 50  # N x 2 at 1,000 digits: as many as by its width


def test_own_places_number_every_digit_by_its_own_place():
    fmt = problem_format(2, "+")  # ^ a1 a0 + b1 b0 = r0 r1 r2 $
    assert place_ids(fmt, "own") == [0, 2, 1, 0, 2, 1, 0, 1, 2, 3, 0]
    assert place_ids(fmt, "predicted") == [0, 2, 1, 0, 2, 1, 1, 2, 3, 0, 0]


def test_training_places_reach_the_longest_width_at_every_width():
    from data.mixing import width_of
    from training.load import calculator_module

    net, fmt = place_net(offset=4)
    module = calculator_module(net.cfg.to_dict(), fmt.to_dict(), {})
    module.widths = width_of  # as training/assemble.py hands it for mixed_widths training (data/mixing.py)
    torch.manual_seed(0)
    for width in (1, 2, 3):
        seq = torch.zeros(2000, fmt.at_width(width).seq_len, dtype=torch.int64)
        places = module.training_places(seq)
        assert int(places.max()) == 3 + 4 + 1  # the top answer place of a 7-digit problem, at every width
        assert torch.equal(places == 0, (torch.tensor(place_ids(fmt.at_width(width))) == 0).expand_as(places))


# ---- answering any width ------------------------------------------------------------------------------------
def test_a_calculator_answers_each_problem_at_its_own_width_up_to_its_longest():
    net, fmt = place_net(offset=4)
    calc = Calculator(net, fmt, CharTokenizer())
    assert (calc.trained_digits, calc.longest) == (3, 7)
    problems = [Problem(12, "+", 7), Problem(1234567, "+", 1), Problem(98765, "+", 43210)]
    answers = calc.answer(problems)
    assert [len(a.text) for a in answers] == [4, 8, 6]  # each answer as wide as its problem's layout
    seqs = calc.encode(problems[1:2], fmt.at_width(7))
    text = prompt_text(fmt.at_width(7), 1234567, "+", 1) + written_text(fmt.at_width(7), 1234567, "+", 1)
    assert seqs[0].tolist() == CharTokenizer().encode(text, bos=True, eos=True)


def test_calc_answers_beyond_the_trained_length_and_order_with_a_warning_each(capsys):
    import calc as calc_cli

    net, fmt = place_net(offset=4)
    subtracter = Calculator(net, problem_format(3, "+-", larger_first=True), CharTokenizer())
    assert calc_cli.answer_lines(subtracter, ["12-7", "1234567+1"], check=False, attention=False) == 0
    out = capsys.readouterr()
    assert "7-digit operands: longer than the 3 digits" in out.err and "smaller operand first" not in out.err
    assert len(out.out.splitlines()) == 2  # both answered
    calc_cli.answer_lines(subtracter, ["7-12"], check=False, attention=False)
    assert "warning: a '-' problem with the smaller operand first" in capsys.readouterr().err


def test_a_model_with_absolute_positions_only_addresses_its_block():
    fmt = problem_format(3, "+")
    cfg = TransformerConfig(vocab_size=CharTokenizer().vocab_size, block_size=fmt.at_width(5).seq_len, d_model=32)
    assert Calculator(Transformer(cfg), fmt, CharTokenizer()).longest == 5
    cfg = TransformerConfig(vocab_size=CharTokenizer().vocab_size, block_size=fmt.seq_len, d_model=32)
    assert Calculator(Transformer(cfg), fmt, CharTokenizer()).longest == 3


def test_expressions_longer_than_the_model_addresses_are_one_clear_error():
    fmt = problem_format(3, "+")
    assert parse_expression("1234567+1", fmt, longest=7).a == 1234567
    with pytest.raises(ExpressionError, match="12345678 has 8 digits; this model can address at most 7"):
        parse_expression("12345678+1", fmt, longest=7)
    with pytest.raises(ExpressionError, match="1234 has 4 digits; this model was trained on at most 3"):
        parse_expression("1234+1", fmt)


# ---- the length analysis's bookkeeping ----------------------------------------------------------------------
class RuleCalculator(Calculator):
    """Writes the true answer up to ``right_up_to`` digits and a wrong last token beyond: the analysis must say so."""

    def __init__(self, right_up_to: int):
        net, fmt = place_net(offset=7)
        super().__init__(net, fmt, CharTokenizer())
        self.right_up_to = right_up_to

    def generate(self, prompts, use_cache=True, fmt=None):
        fmt = fmt or self.fmt
        truth = []
        for row in prompts.tolist():
            a, b = CharTokenizer().decode(row).rstrip("=").split("+")
            truth.append(CharTokenizer().encode(written_text(fmt, int(a), "+", int(b))))
        out = torch.tensor(truth)
        if fmt.digits > self.right_up_to:
            out[:, -1] = (out[:, -1] + 1) % 10
        return out


def test_accuracy_by_length_scores_each_width_and_finds_the_longest_learned():
    rows = accuracy_by_length(RuleCalculator(right_up_to=6), list(range(1, 11)), n=20)
    assert [r.exact_match for r in rows] == [1.0] * 6 + [0.0] * 4
    assert [r.trained for r in rows] == [True] * 3 + [False] * 7
    assert longest_learned(rows, "+") == 6
    problems = long_problems("+", 25, 50)
    assert all(len(str(p.a)) == len(str(p.b)) == 25 for p in problems) and problems == long_problems("+", 25, 50)


def test_larger_first_writes_every_subtraction_with_the_larger_operand_first_and_leaves_the_rest():
    fmt = problem_format(3, "+-", larger_first=True)
    a, op_idx, b = fmt.random_problems(4000, torch.Generator().manual_seed(0))
    minus = fmt.operator_codes(op_idx) == 1
    assert (a[minus] >= b[minus]).all() and (a[~minus] < b[~minus]).any()  # '+' keeps both orders
    assert (fmt.values(a, op_idx, b) >= 0).all()
    small = problem_format(1, "-", larger_first=True)
    a, _, b = small.all_problems()
    assert len(a) == 55 and (a >= b).all()  # 10 + 9 + ... + 1 ordered pairs of one digit
    assert all(p.a >= p.b for p in long_problems("-", 12, 50, larger_first=True))
    assert any(p.a < p.b for p in long_problems("-", 12, 50))
    from data.expressions import accepted

    assert "(e.g. 45-7)" in accepted(problem_format(3, "-", larger_first=True))  # the order it was trained on
    assert "(e.g. 7-45)" in accepted(problem_format(3, "-"))
    with pytest.raises(ValueError, match="larger_first='yes'"):
        problem_format(3, "-", larger_first="yes")


# ---- 10-digit verification ------------------------------------------------------------------------------------
def test_every_carry_pattern_is_drawn_and_each_problem_carries_exactly_there():
    problems = adderboard.carry_patterns(random.Random(0), per_pattern=1)
    patterns = {tuple(carries_by_column(p)) for p in problems}
    assert len(patterns) == 2**10  # all of them
    assert all(p.a < 10**10 and p.b < 10**10 for p in problems)


def test_sum9_cascades_carry_through_the_whole_run_or_not_at_all():
    problems = adderboard.sum9_cascades(random.Random(0))
    runs = [(s, n, c) for s in range(1, 10) for n in range(1, 11 - s) for c in (True, False)]
    assert len(problems) == len(runs)
    for p, (start, length, carry) in zip(problems, runs, strict=True):
        column = [(p.a // 10**i) % 10 + (p.b // 10**i) % 10 for i in range(10)]
        assert column[start : start + length] == [9] * length
        assert carries_by_column(p)[start : start + length] == [int(carry)] * length


def test_carry_chains_carry_through_every_place():
    chains = adderboard.carry_chains()
    assert Problem(9999999999, "+", 1) in chains and Problem(5000000000, "+", 5000000000) in chains
    assert all(sum(carries_by_column(p)) >= 1 for p in chains)
    assert any(carries_by_column(p) == [1] * 10 for p in chains)


class Truthful:
    """A calculator that is right except on ``wrong``."""

    def __init__(self, wrong=()):
        self.wrong = set(wrong)

    def answer(self, problems):
        from model.calculator import Answer

        return [Answer("?", None) if (p.a, p.b) in self.wrong else Answer(str(p.truth), p.truth) for p in problems]


def test_a_right_adder_passes_and_one_wrong_edge_case_fails_its_suite_and_is_named():
    assert all(r.passed for r in adderboard.verify(Truthful()))
    results = {r.name: r for r in adderboard.verify(Truthful(wrong={(0, 0)}))}
    assert not results["zeros and nines"].passed and results["random pairs"].passed
    assert results["zeros and nines"].failures[0]["problem"] == "0+0"


def test_the_suites_at_100_digits_hold_what_only_long_problems_do():
    suites = adderboard.suites(digits=100)
    assert len(suites["random pairs"]) == 1_000 and len(suites["carry patterns"]) == 1_024
    top = 10**100
    assert all(max(p.a, p.b) < top for problems in suites.values() for p in problems)
    assert Problem(top - 1, "+", 1) in suites["carry chains"]  # a carry through all 100 places
    patterns = {tuple(carries_by_column(p, 100)) for p in suites["carry patterns"]}
    assert len(patterns) > 1_000  # drawn patterns, nearly all distinct
    assert {len(str(min(p.a, p.b))) for p in suites["mixed lengths"]} >= {1, 2, 5, 10, 20, 50}
    nines = [p for p in suites["runs of 0s and 9s"] if "9" * 33 in str(p.a) and "9" * 33 in str(p.b)]
    zeros = [p for p in suites["runs of 0s and 9s"] if "0" * 33 in str(p.a).zfill(100)]
    assert len(nines) >= 50 and len(zeros) >= 50
    cascades = suites["sum-9 cascades"]
    assert 200 < len(cascades) < 500  # 20 starts x the run lengths that fit x carry in or not
    assert all(r.passed for r in adderboard.verify(Truthful(), digits=100))
    assert adderboard.suites(digits=100) == suites  # the same for the same seed


def test_random_pairs_are_the_fixed_seed_draw():
    pairs = adderboard.random_pairs()
    assert len(pairs) == 10_000 and pairs == adderboard.random_pairs()
    assert pairs != adderboard.random_pairs(seed=1) and max(max(p.a, p.b) for p in pairs) < 10**10


def test_verify_refuses_a_model_that_does_not_add_ten_digit_numbers_in_one_line(run_add):
    out = subprocess.run(  # run_add: a 2-digit model (tests/conftest.py)
        [sys.executable, "verify.py", str(run_add), str(run_add / "missing")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 2 and "verification is for models that add 10-digit numbers" in lines[0]
    assert "missing" in lines[1]


def test_calc_asks_a_model_without_a_table_up_to_ten_thousand_digits_and_says_so_beyond(monkeypatch):
    import io

    from calc import MAX_LINE_CHARS, LongLine, input_lines

    fmt = problem_format(10, "*")
    problem = "9" * ANY_LENGTH + "*" + "9" * ANY_LENGTH
    (line,) = input_lines(io.StringIO(problem + "=" + "9" * (2 * ANY_LENGTH) + "\n"))
    assert not isinstance(line, LongLine) and len(line) <= MAX_LINE_CHARS  # two operands and a product fit a line
    monkeypatch.setattr(sys, "get_int_max_str_digits", lambda: 4300)  # Python's default limit, below 10,000 digits
    lifted = []
    lift = sys.set_int_max_str_digits
    monkeypatch.setattr(sys, "set_int_max_str_digits", lambda n: (lifted.append(n), lift(n)))
    assert parse_expression(problem, fmt, longest=ANY_LENGTH).a == 10**ANY_LENGTH - 1
    assert lifted and lifted[-1] > 2 * ANY_LENGTH  # lifted for the operands and their product
    with pytest.raises(ExpressionError, match=f"has {ANY_LENGTH + 1} digits; this model can address at most"):
        parse_expression("1" * (ANY_LENGTH + 1) + "*1", fmt, longest=ANY_LENGTH)


def test_a_long_problems_carries_are_counted_as_the_tensor_rule_counts_them():
    from data.difficulty import borrows, carries, long_difficulty

    rng = random.Random(0)
    pairs = [(rng.randrange(10 ** rng.randint(1, 17)), rng.randrange(10 ** rng.randint(1, 17))) for _ in range(300)]
    pairs += [(10**17 - 1, 1), (0, 0), (5 * 10**16, 5 * 10**16)]
    a, b = torch.tensor([p[0] for p in pairs]), torch.tensor([p[1] for p in pairs])
    assert [long_difficulty("+", x, y) for x, y in pairs] == carries(a, b).tolist()
    assert [long_difficulty("-", x, y) for x, y in pairs] == borrows(a, b).tolist()
    assert long_difficulty("+", 10**999 - 1, 1) == 999  # a carry through all 999 places


def test_calc_eval_scores_problems_of_every_width_a_model_addresses():
    net, fmt = windowed_net()
    calc = Calculator(net, fmt, CharTokenizer())
    problems = [Problem(12, "+", 7), Problem(10**40 + 3, "+", 10**39), Problem(999, "+", 1)]
    report = calc.evaluate(problems, show_mistakes=3)
    assert report["n_problems"] == 3 and set(report["by_operand_digits"]) == {"2", "3", "41"}
    assert report["by_carries"]["3"]["n"] == 1  # 999 + 1
    answers = calc.answer(problems)
    right = sum(a.value == p.truth for a, p in zip(answers, problems, strict=True))
    assert report["right"] == right and len(report["mistakes"]) == 3 - right
    for m in report["mistakes"]:  # each mistake read in its own problem's layout
        assert m["model_text"] == next(a.text for a, p in zip(answers, problems, strict=True) if p.text == m["problem"])
