"""Many operands: ``a1+a2+...+ak``, written with a running sum (``data.operands=k``), beside the lesson's ``a op b``.

    [BOS] 012+034+005= 210+640+150 [EOS]     12, 12+34 = 46, 46+5 = 51: every number 3 digits, lines units first

Every number is written as wide as the result: the k operands in the prompt (zero-padded), then k lines in the
result's digit order: line j is the sum of the first j operands, so line 1 copies a1 and the last line is the
result. Every digit of line j is then the digit of line j - 1 at its place, plus the digit of a_j there (a 0 above
its own digits), plus a carry of 0 or 1 that the digit written before it tells apart -- the addition of two numbers,
the same on every line, at every width and for every place of the result. A model with the line window of
``model.place_of=lined`` (model/positions.py) sees, of the lines, only its own and the one before, and of the
operands only a_j and the '+' after it (on line -j: seen from line j alone, data/positions.py) -- so a line's last
digit writes '+' where that '+' is there and the end where it is not, and what a token computes is the same with 3
operands and with 300.

:class:`SumFormat` is the format (what :class:`data.problems.ProblemFormat` is to ``a op b``: the layout, where the
answer sits and how it is scored -- those three read from ProblemFormat itself, so they are written once), with its
encoder and sampler beside it (data/mixing.py draws the training stream's widths with them); data/build.py builds
them for ``operands > 2``. A
problem is one (N, k) int64 tensor of operands, or, as text (calc.py, the length measurements), a list of ints.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import torch

from data.checks import check_whole
from data.difficulty import long_difficulty
from data.problems import SPLITS, ProblemFormat, digits_of, lookup, mix
from data.text import ordered
from data.working import result_after, work_length

MOST_OPERANDS = 10_000  # calc.py and the measurements ask at most this many


@dataclasses.dataclass(frozen=True)
class SumFormat:
    """How sums of ``terms`` operands of up to ``digits`` digits are written (stored in checkpoints as
    :meth:`to_dict`); :meth:`random_problems` says how they are drawn."""

    digits: int = 10
    terms: int = 10
    reverse_answer: bool = True
    operators = "+"  # what the rest of the project reads of any format: its operators, its working piece
    signed, show_work, draws, larger_first = False, True, None, False

    def __post_init__(self) -> None:
        check_whole("digits", self.digits)
        check_whole("operands", self.terms, least=2, most=MOST_OPERANDS)
        if not isinstance(self.reverse_answer, bool):
            raise ValueError(f"reverse_answer={self.reverse_answer!r}: must be true or false")

    def to_dict(self) -> dict:
        """The settings data/build.py's ``problem_format`` rebuilds it from (a checkpoint's, results.json's)."""
        fixed = {"operators": "+", "show_work": True, "mixed_lengths": True}  # what every sum is written with
        return {"digits": self.digits, "operands": self.terms, "reverse_answer": self.reverse_answer} | fixed

    def at_width(self, digits: int) -> SumFormat:
        """The format ``digits`` wide, with as many operands in proportion (at least 2): one width, one length,
        as mixed-width training and data/mixing.py's ``width_of`` need."""
        return self.shaped(max(2, round(self.terms * digits / self.digits)), digits)

    def shaped(self, terms: int, digits: int) -> SumFormat:
        """The same layout for ``terms`` operands of ``digits`` digits."""
        return dataclasses.replace(self, terms=terms, digits=digits)

    # ---- layout: [BOS] a1+a2+...+ak= line1+line2+...+result [EOS] ------------------------------------
    @property
    def answer_digits(self) -> int:
        """The width of every number written, operands, lines and result: k numbers below 10**digits sum below
        k * 10**digits."""
        return self.digits + len(str(self.terms - 1))

    @property
    def prompt_len(self) -> int:
        """[BOS], each operand (``answer_digits`` wide) and the '+' or '=' after it."""
        return 1 + self.terms * (self.answer_digits + 1)

    # the rest of the layout, where the answer sits and how it is scored: the lesson's own rules, on this layout's
    # widths and working (lines 1 .. k - 1 before the result, each followed by its '+': data/working.py)
    result_len = ProblemFormat.result_len
    work_len = ProblemFormat.work_len
    answer_len = ProblemFormat.answer_len
    seq_len = ProblemFormat.seq_len
    answer_of = ProblemFormat.answer_of
    prompt_of = ProblemFormat.prompt_of
    forced_answers = ProblemFormat.forced_answers
    exact_match = ProblemFormat.exact_match
    judge = ProblemFormat.judge

    # ---- problems as tensors: operands (N, terms) int64 ------------------------------------------------
    def check_vectorised(self) -> None:
        """ValueError unless int64 holds every sum of this format (what drawing and encoding in bulk need)."""
        fits = lambda d: self.terms * 10**d < 2**63 and self.shaped(self.terms, d).answer_digits <= 19  # noqa: E731
        if not fits(self.digits):
            most = max((d for d in range(1, 19) if fits(d)), default=0)
            raise ValueError(f"digits={self.digits}: at most {most} with {self.terms} operands")

    @property
    def n_problems(self) -> int:
        return 10 ** min(self.digits * self.terms, 300)  # beyond 10**300 (a float's range) it makes no difference

    def random_problems(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor]:
        """n problems: ((n, terms) operands,). Half the problems have operands of mixed lengths (each of a uniform
        length 1..digits, uniform within it), half uniform below 10**digits (9 in 10 of them ``digits`` long: sums
        whose top digits grow to 9)."""
        shape, device = (n, self.terms), generator.device
        length = torch.randint(1, self.digits + 1, shape, generator=generator, device=device)
        mixed = torch.rand(n, 1, generator=generator, device=device) < 0.5  # (n, 1): which problems
        low = torch.where(length == 1, 0, 10 ** (length - 1))  # the smallest value of that length
        draw = torch.randint(10**self.digits, shape, generator=generator, device=device)
        return (torch.where(mixed, low + draw % (10**length - low), draw),)

    def split_of(self, operands: torch.Tensor, val_fraction: float, test_fraction: float) -> torch.Tensor:
        """Split id per problem (0 train, 1 val, 2 test): a fixed hash of its operands, in order."""
        h = torch.zeros(len(operands), dtype=torch.int64, device=operands.device)
        for column in operands.unbind(1):
            h = mix(h * 0x2545F4914F6CDD1D ^ column)
        h = h.remainder(1_000_000)
        test_cut = round(test_fraction * 1_000_000)
        val_cut = test_cut + round(val_fraction * 1_000_000)
        return torch.where(h < test_cut, 2, torch.where(h < val_cut, 1, 0))


class RunningSum:
    """A sum's working as the rest of the project reads a working piece (data/working.py): how many lines, how many
    tokens, and where the result starts."""

    @staticmethod
    def lines(fmt: SumFormat) -> int:
        return fmt.terms - 1

    def length(self, fmt: SumFormat) -> int:
        return work_length(self, fmt)

    def result_text(self, fmt: SumFormat, written: str) -> str:
        return result_after(self, fmt, written)


SumFormat.working = RunningSum()  # the format's working piece, as ProblemFormat's is handed one


class SumEncoder:
    """Sums to token ids in bulk: the prompt, every line of the running sum, the result."""

    def __init__(self, fmt: SumFormat, vocab: dict[str, int]):
        fmt.check_vectorised()
        self.fmt, self.vocab = fmt, vocab

    def encode(self, operands: torch.Tensor) -> torch.Tensor:
        """(N, terms) operands -> (N, seq_len) token ids."""
        fmt, vocab, device = self.fmt, self.vocab, operands.device
        n, k = operands.shape
        digit = lookup(tuple(vocab[str(d)] for d in range(10)), device)  # (10,): digit -> its token id
        plus, eq = vocab["+"], vocab["="]
        after = torch.full((n, k, 1), plus, dtype=torch.int64, device=device)
        after[:, -1] = eq
        prompt = torch.cat([digit[digits_of(operands, fmt.answer_digits)], after], dim=2).flatten(1)  # (N, k * (W + 1))
        lines = digit[digits_of(operands.cumsum(1), fmt.answer_digits)]  # (N, k, answer_digits)
        if fmt.reverse_answer:
            lines = lines.flip(2)
        answer = torch.cat([lines, torch.full_like(after, plus)], dim=2).flatten(1)[:, :-1]  # no '+' after the last
        column = lambda token: torch.full((n, 1), token, dtype=torch.int64, device=device)  # noqa: E731
        return torch.cat([column(vocab["[BOS]"]), prompt, answer, column(vocab["[EOS]"])], dim=1)


class SumSampler:
    """Draws sums of one split (as :class:`data.sampler.ProblemSampler` draws ``a op b``): held-out sets of
    distinct problems, once; training draws as a fresh stream."""

    def __init__(self, fmt: SumFormat, val_fraction: float, test_fraction: float):
        fmt.check_vectorised()
        self.fmt, self.fractions = fmt, {"val": val_fraction, "test": test_fraction}
        self.train_fraction = 1.0 - val_fraction - test_fraction

    def sample(self, split: str, n: int, generator: torch.Generator) -> tuple[torch.Tensor]:
        """((n, terms) operands,) of ``split``."""
        split_id, fraction = SPLITS.index(split), self.train_fraction if split == "train" else self.fractions[split]
        parts, have, seen = [torch.zeros(0, self.fmt.terms, dtype=torch.int64, device=generator.device)], 0, set()
        while have < n:  # draw, keep the split's problems, until there are n
            (operands,) = self.fmt.random_problems(math.ceil((n - have) / fraction * 1.1) + 64, generator)
            keep = self.fmt.split_of(operands, self.fractions["val"], self.fractions["test"]) == split_id
            if split != "train":  # held-out sets hold distinct problems
                for i in keep.nonzero().squeeze(1).tolist():
                    key = tuple(operands[i].tolist())
                    keep[i] = key not in seen
                    seen.add(key)
            parts.append(operands[keep])
            have += int(keep.sum())
        return (torch.cat(parts)[:n],)


# ---- sums as text: any width, in Python's unbounded ints (calc.py, the length measurements) -------------
@dataclasses.dataclass(frozen=True)
class SumProblem:
    """A sum as a person writes it, parsed (data/expressions.py), as :class:`data.expressions.Problem` is a op b."""

    operands: tuple[int, ...]
    given: int | None = None  # the answer written after '=', when the input carried one
    op = "+"

    @property
    def text(self) -> str:
        return "+".join(map(str, self.operands))

    @property
    def truth(self) -> int:
        return sum(self.operands)

    @property
    def digits(self) -> int:
        """Digits of the longest operand: the width the sum is written at."""
        return len(str(max(self.operands)))

    def layout(self, fmt: SumFormat) -> SumFormat:
        """``fmt`` shaped for this sum: its operands, zero-padded to the longest."""
        return fmt.shaped(len(self.operands), self.digits)

    def carries(self) -> int:
        """Carries of every line of its running sum: what makes a sum hard."""
        total, carries = 0, 0
        for x in self.operands:
            carries, total = carries + long_difficulty("+", total, x), total + x
        return carries


def sum_text(fmt: SumFormat, operands: list[int]) -> str:
    """The whole string after [BOS]: the prompt, the lines and the result, as the model is trained to write it."""
    width = fmt.answer_digits
    prompt = "+".join(f"{x:0{width}d}" for x in operands) + "="
    return prompt + "+".join(ordered(fmt, f"{s:0{width}d}") for s in itertools.accumulate(operands))
