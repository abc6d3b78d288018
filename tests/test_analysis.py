"""Head ablation, pruning and head roles: real measurements on a model trained here."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from analysis.engine.cache import run_with_cache
from analysis.engine.evaluator import Evaluator, evaluate, head_means
from analysis.metrics.ablation import ablate_each_head
from analysis.metrics.pruning import PruningStep, prunable_fraction, prune_heads
from analysis.metrics.roles import describe_head, mean_patterns
from data.arithmetic import DataConfig
from data.build import data_module, problem_format
from data.positions import positions
from data.problems import ProblemFormat
from model.hooks import ablated, zero_ablated
from tests.conftest import untrained_calculator
from training.load import calculator_module


@pytest.fixture(scope="module")
def trained():
    """A 1-layer, 4-head model trained on 2-digit addition for a few seconds.

    (Each answer digit needs four operand digits -- its place and the carry's -- so one layer needs four
    heads; with fewer, small models often stall at ~10% for a long time.)"""
    L.seed_everything(0, verbose=False)
    dm = data_module(DataConfig(digits=2, n_val=300, n_test=400, val_fraction=0.05, test_fraction=0.05, seed=0))
    module = calculator_module(
        model=dict(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len, d_model=64, n_heads=4, n_layers=1),
        fmt=dm.fmt.to_dict(),
        optim=dict(lr=5e-3, weight_decay=0.1, betas=[0.9, 0.98], warmup_steps=50, min_lr_ratio=0.1),
    )
    trainer = L.Trainer(
        max_steps=400,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        gradient_clip_val=1.0,
    )
    trainer.fit(module, datamodule=dm)
    return module.eval(), dm.held_out_set("test")


def test_ablating_the_heads_the_model_relies_on_breaks_it(trained):
    module, test = trained
    intact = evaluate(module, test)
    assert intact.exact_match >= 0.9  # the intact model has learned the task
    rows = ablate_each_head(module, test)
    assert len(rows) == 1 * 4 * 2  # layers x heads x (zero, mean)
    worst = min(r.delta_exact_match for r in rows if r.ablation == "zero")
    assert worst <= -0.3  # removing its most important head costs it dearly...
    everything = evaluate(module, test, dict.fromkeys([(0, h) for h in range(4)], 0.0))
    assert everything.exact_match <= 0.2 and everything.loss > intact.loss  # ...and with no heads it is lost
    for r in rows:  # deltas are against the intact model
        assert r.delta_exact_match == pytest.approx(r.exact_match - intact.exact_match)


def test_teacher_forced_exact_match_equals_greedy_decoding(trained):
    module, test = trained
    greedy = module.score(test)["exact_match"].item()
    assert evaluate(module, test).exact_match == pytest.approx(greedy)
    assert module.score(test, greedy=False)["exact_match"].item() == pytest.approx(greedy)  # validation's way
    with zero_ablated(module.net, [(0, 1)]):  # also with a head switched off, through its hook
        _, forced = module.forced_scores(test)
        decoded = module.decode_answers(test)
    P, A = module.fmt.prompt_len, module.fmt.answer_len
    assert torch.equal(forced, (decoded == test[:, P : P + A]).all(dim=1))


def test_the_test_decodes_only_what_it_gets_wrong_and_writes_what_a_full_decode_writes(trained):
    from training.results import test_mistakes

    module, test = trained
    with zero_ablated(module.net, [(0, 1)]):  # a model that gets some problems wrong
        decoded = module.decode_answers(test)
        answers = module.greedy_answers(test)
        P, A = module.fmt.prompt_len, module.fmt.answer_len
        wrong = (decoded != test[:, P : P + A]).any(dim=1)
        assert 0 < wrong.sum() < len(test)
        assert torch.equal(answers, decoded)  # every row as a full greedy decode writes it
        assert module.score(test)["digit_accuracy"] == (decoded == test[:, P : P + A]).float().mean()
        # what Lightning's test keeps, batch by batch, is what test_mistakes would find by itself
        quiet = dict(logger=False, enable_progress_bar=False, enable_model_summary=False)
        L.Trainer(accelerator="cpu", **quiet).test(module, torch.utils.data.DataLoader(test, 64), verbose=False)
        kept, searched = test_mistakes(module, test, found=module.test_wrong), test_mistakes(module, test)
    assert kept == searched and kept["n_mistakes"] == wrong.sum() and len(kept["mistakes"]) == min(50, wrong.sum())


def test_mean_ablation_over_a_single_problem_changes_nothing(trained):
    module, test = trained
    one = test[:1]
    means = head_means(run_with_cache(module.net, one[:, :-1]))  # one problem's mean is that problem's output
    before, _ = module.net(one[:, :-1])
    with ablated(module.net, {(0, h): means[0, h] for h in range(4)}):
        after, _ = module.net(one[:, :-1])
    torch.testing.assert_close(before, after)
    with ablated(module.net, {(0, 1): torch.zeros_like(means[0, 1])}):
        zeroed, _ = module.net(one[:, :-1])
    with zero_ablated(module.net, [(0, 1)]):
        torch.testing.assert_close(zeroed, module.net(one[:, :-1])[0])
    assert not torch.allclose(zeroed, before)
    torch.testing.assert_close(module.net(one[:, :-1])[0], before)  # the hook is gone after the block


def test_the_cache_gives_what_separate_passes_gave(trained):
    """Mean patterns and head means read from the one cached pass equal those of passes of their own."""
    module, test = trained
    cache = run_with_cache(module.net, test[:, :-1], batch_size=150)
    _, weights = module.net(test[:, :-1], need_weights=True)
    torch.testing.assert_close(mean_patterns(cache), torch.stack([w.mean(dim=0) for w in weights]))
    z = []
    handle = module.net.blocks[0].attn.hook_z.add_hook(z.append)
    module.net(test[:, :-1])
    handle.remove()
    torch.testing.assert_close(head_means(cache)[0], z[0].mean(dim=0).transpose(0, 1))


@pytest.mark.parametrize("order", ["ranked", "greedy"])
def test_pruning_curve(trained, order):
    module, test = trained
    curve = prune_heads(module, test, order)
    assert [len(s.removed) for s in curve] == [0, 1, 2, 3, 4]
    assert curve[0].exact_match == pytest.approx(evaluate(module, test).exact_match)
    for step in curve[1:]:  # every point is a real measurement of the model with those heads zeroed
        with zero_ablated(module.net, step.removed):
            assert step.exact_match == pytest.approx(module.score(test)["exact_match"].item())
    assert sorted(curve[-1].removed) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    # the head removed first is the one whose removal alone hurts least
    alone = [evaluate(module, test, {(0, h): 0.0}) for h in range(4)]
    assert curve[1].removed[0] == (0, max(range(4), key=lambda h: (alone[h].exact_match, -alone[h].loss)))


def test_scores_that_start_at_a_later_layer_equal_full_passes():
    module, test = untrained_calculator(n_layers=3, seed=1)
    evaluator = Evaluator(module, test, batch_size=128)  # several chunks
    for layer, head in [(0, 1), (1, 2), (2, 3)]:
        cached = evaluator.score({(layer, head): 0.0})  # starts at `layer`, from the cached residual stream
        with zero_ablated(module.net, [(layer, head)]):  # a whole pass, as the model is used
            full = module.score(test, greedy=False)
        assert cached.exact_match == full["exact_match"].item()
        assert cached.loss == pytest.approx(full["loss"].item(), rel=1e-5)


def test_prunable_fraction_stops_at_the_first_step_losing_more_than_the_tolerance():
    curve = [
        PruningStep([], 0.0, 0.99, 0),
        PruningStep([(0, 0)], 0.25, 0.985, 0),
        PruningStep([(0, 0), (0, 1)], 0.5, 0.97, 0),
        PruningStep([(0, 0), (0, 1), (1, 0)], 0.75, 0.99, 0),
    ]
    assert prunable_fraction(curve, 0.01) == 0.25
    assert prunable_fraction(curve, 0.03) == 0.75
    assert prunable_fraction(curve[:1], 0.01) == 0.0


def synthetic_pattern(fmt: ProblemFormat, key_for_query) -> torch.Tensor:
    """A (T-1, T-1) attention pattern where query q puts all its weight on key_for_query(q, roles)."""
    roles = positions(fmt)
    T = fmt.seq_len - 1
    pattern = torch.zeros(T, T)
    for q in range(T):
        pattern[q, key_for_query(q, roles)] = 1.0
    return pattern


def test_roles_name_the_patterns_they_see():
    fmt = problem_format(3, "+", True)
    roles = positions(fmt)
    eq = next(i for i, r in enumerate(roles) if r.kind == "=")
    assert describe_head(fmt, synthetic_pattern(fmt, lambda q, _: eq if q >= eq else 0)) == "attends to ="
    assert describe_head(fmt, synthetic_pattern(fmt, lambda q, _: max(q - 1, 0))) == "previous token"

    def aligned(q, roles):  # the query predicting answer place k looks at a's place k (b's for the top place)
        target = roles[q + 1]
        if target.kind != "answer":
            return 0
        match = [i for i, r in enumerate(roles) if r.kind == "a" and r.place == target.place]
        return match[0] if match else 0

    assert describe_head(fmt, synthetic_pattern(fmt, aligned)).startswith("answer digit 10^k reads a digit 10^k")


def test_roles_speak_of_borrows_for_subtraction_and_partial_products_for_multiplication():
    def reads_place(fmt, offset):  # the query predicting answer place k reads a and b at place k + offset
        roles = positions(fmt)
        T = fmt.seq_len - 1
        pattern = torch.zeros(T, T)
        for q in range(T):
            target = roles[q + 1]
            keys = [i for i, r in enumerate(roles) if r.kind in "ab" and target.kind == "answer"]
            keys = [i for i in keys if roles[i].place == target.place + offset] or [0]
            pattern[q, keys] = 1.0 / len(keys)
        return pattern

    minus = problem_format(3, "-", True)
    assert describe_head(minus, reads_place(minus, -1)).endswith("(the borrow in)")

    times = problem_format(2, "*", True)
    roles, T = positions(times), times.seq_len - 1
    where = {(r.kind, r.place): i for i, r in enumerate(roles)}
    pattern = torch.zeros(T, T)
    for q in range(T):  # answer place k reads a_i and b_(k-i) for the first i that fits: a partial product
        k = roles[q + 1].place if roles[q + 1].kind == "answer" else None
        pair = next(((i, k - i) for i in range(2) if k is not None and 0 <= k - i < 2), None)
        if pair:
            pattern[q, where[("a", pair[0])]] = pattern[q, where[("b", pair[1])]] = 0.5
        else:
            pattern[q, 0] = 1.0
    assert describe_head(times, pattern) == "answer digit 10^k reads a_i and b_j with i+j=k (a partial product)"
    assert "partial product" not in describe_head(times, reads_place(times, 5))  # nothing of the kind


@pytest.mark.parametrize("reads", ["multiplier", "multiplicand", "carry"])
def test_heads_of_the_working_are_named_by_the_partial_product_digit_they_fetch(reads):
    fmt = problem_format(3, "*", True, show_work=True)
    roles, T = positions(fmt), fmt.seq_len - 1
    where = {(r.kind, r.place): i for i, r in enumerate(roles)}
    pattern = torch.zeros(T, T)
    for q in range(T):
        target = roles[q + 1]
        j = (target.line + 1) // 2 if target.kind == "work" and (target.line == 0 or target.line % 2) else None
        if j is not None:  # a digit of partial product a*b_j: it reads b_j, a_(k-j) or a_(k-j-1)
            place = {"multiplier": j, "multiplicand": target.place - j, "carry": target.place - j - 1}[reads]
        key = None if j is None else ("b" if reads == "multiplier" else "a", place)
        pattern[q, where.get(key, 0)] = 1.0  # other queries, and places with no such digit: [BOS]
    described = describe_head(fmt, pattern)
    want = {"multiplier": "multiplier digit)", "multiplicand": "(the digit it multiplies)", "carry": "(the carry in)"}
    assert described.startswith("partial product") and described.endswith(want[reads])
    plain = problem_format(3, "*", True)  # no working: nothing of the kind
    assert "partial product a*b_j" not in describe_head(plain, torch.eye(plain.seq_len - 1))


def test_a_head_with_no_single_habit_is_described_answer_digit_by_answer_digit():
    fmt = problem_format(2, "+", True)  # answer r0 r1 r2 (reversed), predicted from '=', r0 and r1
    roles = positions(fmt)
    where = {(r.kind, r.place): i for i, r in enumerate(roles)}
    T = fmt.seq_len - 1
    pattern = torch.full((T, T), 1.0 / T)
    eq = where[("=", None)]
    pattern[eq] = 0
    pattern[eq, where[("a", 0)]] = pattern[eq, where[("b", 0)]] = 0.5  # r0 reads a0 and b0 together
    pattern[eq + 1] = 0
    pattern[eq + 1, where[("bos", None)]] = 1.0  # r1 reads [BOS]
    # r2's query keeps the uniform row: spread out
    assert describe_head(fmt, pattern) == "reads r0<-a0+b0 r1<-^ r2<-~"


def test_maps_during_training_skip_the_validation_where_training_ends(tmp_path):
    from types import SimpleNamespace

    from analysis.callbacks import AttentionMaps

    module, _ = untrained_calculator()
    maps = AttentionMaps(tmp_path, every_n_val=1)
    maps.setup(None, module, "fit")
    for step, stopping in ((25, False), (50, True), (100, False)):  # drawn; a stop (the target reached); the last
        state = dict(global_step=step, max_steps=100, should_stop=stopping, loggers=[])
        trainer = SimpleNamespace(sanity_checking=False, is_global_zero=True, **state)
        maps.on_validation_end(trainer, module)
    assert sorted(p.name for p in (tmp_path / "attention").iterdir()) == [
        "step000025.json", "step000025_layer0.png", "step000025_layer1.png"
    ]  # fmt: skip
