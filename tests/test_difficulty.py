"""What makes a problem hard (data/difficulty.py) and the hard-case sampling that draws by it."""

from __future__ import annotations

import random

import torch

from data.arithmetic import DataConfig
from data.datamodule import ArithmeticDataModule
from data.difficulty import HardCases, borrows, carries, difficulty, product_carries
from data.expressions import Problem
from data.problems import ProblemFormat
from data.sampler import ProblemSampler
from data.stream import FreshBatches
from data.tokenizer import CharTokenizer


def on_paper(a: int, b: int, op: str) -> int:
    """Carries (or borrows) counted column by column, as on paper."""
    if op == "*":  # long multiplication: column k sums every a_i * b_j with i + j = k, plus the carry
        da, db = [int(c) for c in str(a)[::-1]], [int(c) for c in str(b)[::-1]]
        count = carry = 0
        for k in range(len(da) + len(db) - 1):
            column = sum(da[i] * db[k - i] for i in range(len(da)) if 0 <= k - i < len(db)) + carry
            carry = column // 10
            count += carry > 0
        return count
    x, y = (max(a, b), min(a, b)) if op == "-" else (a, b)
    count = carry = 0
    while x or y:
        column = x % 10 - y % 10 - carry if op == "-" else x % 10 + y % 10 + carry
        carry = int(column < 0 if op == "-" else column >= 10)
        count += carry
        x, y = x // 10, y // 10
    return count


def test_problem_features_match_pencil_and_paper():
    rng = random.Random(0)
    a = [rng.randrange(10 ** rng.randrange(1, 7)) for _ in range(500)]
    b = [rng.randrange(10 ** rng.randrange(1, 7)) for _ in range(500)]
    ta, tb = torch.tensor(a), torch.tensor(b)
    pairs = list(zip(a, b, strict=True))
    assert carries(ta, tb).tolist() == [on_paper(x, y, "+") for x, y in pairs]
    assert borrows(ta, tb).tolist() == [on_paper(x, y, "-") for x, y in pairs]
    assert product_carries(ta, tb).tolist() == [on_paper(x, y, "*") for x, y in pairs]
    assert [Problem(x, "+", y).digits for x, y in pairs] == [len(str(max(x, y))) for x, y in pairs]
    ops = torch.tensor([rng.randrange(3) for _ in pairs])  # each problem scored by its own operator
    expected = [on_paper(x, y, "+-*"[o]) for (x, y), o in zip(pairs, ops.tolist(), strict=True)]
    assert difficulty(ProblemFormat(6, "+-*"), ta, ops, tb).tolist() == expected
    # the columns given (hard-case sampling knows them: nothing read back from a GPU), the same figures
    for rule in (carries, borrows, product_carries):
        assert torch.equal(rule(ta, tb, 6), rule(ta, tb)), rule.__name__
    assert difficulty(ProblemFormat(6, "+-*"), ta, ops, tb, 6).tolist() == expected
    assert difficulty(ProblemFormat(6, "+-*"), ta[:0], ops[:0], tb[:0]).tolist() == []  # no problems: no scores


def test_hard_cases_fade_to_uniform_batches():
    hard = HardCases(ProblemSampler(ProblemFormat(10, "+")), share=0.5, fade_steps=1000)
    assert [hard.count(256, step) for step in (0, 500, 1000, 5000)] == [128, 64, 0, 0]


def test_early_batches_hold_more_carries_and_the_stream_stays_a_function_of_the_step():
    def first_batch(dm: ArithmeticDataModule, step: int) -> torch.Tensor:
        return next(
            iter(
                FreshBatches(
                    dm.data.sampler, dm.data.encoder, dm.data.batch_size, dm.data.seed, start=step, hard=dm.data.hard
                )
            )
        )

    def mean_carries(batch: torch.Tensor) -> float:  # (B, seq_len) of 5-digit additions -> carries per problem
        digits = batch - batch.new_tensor(CharTokenizer().vocab["0"])  # the ids of 0-9 are contiguous
        number = lambda columns: sum(digits[:, c] * 10 ** (4 - i) for i, c in enumerate(columns))  # noqa: E731
        return carries(number(range(1, 6)), number(range(7, 12))).float().mean().item()

    kw = dict(digits=5, batch_size=512, n_val=10, n_test=10)
    uniform = ArithmeticDataModule(DataConfig(**kw, hard_share=0.0, hard_fade_steps=0))
    hard = ArithmeticDataModule(DataConfig(**kw, hard_share=1.0, hard_fade_steps=100))
    u0, h0, h100 = (mean_carries(first_batch(dm, step)) for dm, step in ((uniform, 0), (hard, 0), (hard, 100)))
    assert h0 > u0 + 1.0  # the most carries of 8 draws: ~4 of 5 columns against ~2.3
    assert abs(h100 - u0) < 0.3  # faded out: uniform again
    assert torch.equal(first_batch(hard, 0), first_batch(hard, 0))  # a step's batch is a function of the step
