"""Arithmetic problems: how one is laid out, its tokens, which split it belongs to, and where its answer sits.

A problem ``a <op> b`` is written as one fixed-length string, so a batch needs no padding:

    [BOS] a op b = answer [EOS]          e.g. 3-digit addition, reversed answer:
    [BOS] 123+045=8610 [EOS]             (123 + 45 = 168, written 0168 and reversed to 8610)

Operands are zero-padded to ``digits``; the answer is zero-padded to a fixed width and, with ``reverse_answer``,
written least-significant digit first -- the order in which carries are computed, so every answer digit depends
only on what is already written (see the README for the measurement). When subtraction is among the operators every
answer also carries a sign ('+' or '-').

Splits are a pure function of the problem (a hash of a, op, b), so no test problem can ever be drawn for training,
whatever the seed or batch size; data/sampler.py draws the problems of a split. A problem as text (what calc.py,
verify.py, the analyses and the lab read and write): data/text.py.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

import torch
import torch.nn.functional as F

from data.checks import check_whole

OPERATORS = "+-*"
SPLITS = ("train", "val", "test")
# The exact-match share at which a task counts as done: the step learning curves mark and sweeps compare
# (steps_to_99), verify.py's pass mark, the longest length a model is said to answer.
MASTERED = 0.99
# The widest operands int64 arithmetic can hold: a*b must stay below 2**63 for '*', a+b for '+'/'-'.
MAX_DIGITS = {"+": 17, "-": 17, "*": 9}


def mix(x: torch.Tensor) -> torch.Tensor:
    """A splitmix64-style integer hash on int64 (multiplication wraps around, which is what we want)."""
    x = x ^ (x >> 31)
    x = x * 0x62A9D9ED799705F5
    x = x ^ (x >> 28)
    x = x * 0x4BE98134A5976FD3
    return x ^ (x >> 32)


@functools.cache
def lookup(values: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """A small int64 lookup table on ``device``, copied there once: each copy to a GPU waits for the GPU."""
    return torch.tensor(values, dtype=torch.int64, device=device)


def digits_of(x: torch.Tensor, width: int) -> torch.Tensor:
    """(...) non-negative ints -> (..., width) decimal digits, most significant first."""
    powers = 10 ** torch.arange(width - 1, -1, -1, dtype=torch.int64, device=x.device)
    return (x.unsqueeze(-1) // powers) % 10


@dataclasses.dataclass(frozen=True)
class ProblemFormat:
    """How problems are written; stored in checkpoints so a model can be used without its config. The research
    settings, off by default, work through pieces data/build.py's ``problem_format`` checks and hands in, never
    imported here: ``working`` (``show_work``) and ``draws`` (the varied operands). None: the lesson's format."""

    digits: int = 3
    operators: str = "+"
    reverse_answer: bool = True
    show_work: bool = False  # '*': the working of long multiplication before the result (data/working.py)
    mixed_lengths: float = 0.0  # the share of problems with operands of mixed lengths (data/operands.py)
    round_numbers: float = 0.0  # the share of operands drawn as round numbers (data/operands.py)
    larger_first: bool = False  # '-' problems with the larger operand first (data/operands.py)
    working: object = dataclasses.field(default=None, compare=False, repr=False)  # pieces: not saved, not compared
    draws: object = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        given = self.operators
        ops = given if isinstance(given, str) else "".join(map(str, given)) if isinstance(given, Iterable) else ""
        object.__setattr__(self, "operators", ops)  # accept [+, -] as well as "+-"
        if not ops or any(op not in OPERATORS for op in ops) or len(set(ops)) != len(ops):
            raise ValueError(f"operators={given!r}: give one or more of '+', '-', '*', each once (e.g. '+-')")
        check_whole("digits", self.digits)
        if not isinstance(self.reverse_answer, bool):
            raise ValueError(f"reverse_answer={self.reverse_answer!r}: must be true or false")
        varied = self.mixed_lengths or self.round_numbers or self.larger_first
        if (self.show_work and self.working is None) or (varied and self.draws is None):
            raise ValueError("a research setting needs its piece: build the format with data.build.problem_format")

    def at_width(self, digits: int) -> ProblemFormat:
        """The same format with operands written ``digits`` wide (a model with places can answer other widths)."""
        return dataclasses.replace(self, digits=digits)

    def to_dict(self) -> dict:
        """The settings, as a checkpoint saves them (the pieces are rebuilt from them)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.compare}

    # ---- layout: [BOS] a op b = [working] result [EOS] ---------------------------------------------
    @property
    def signed(self) -> bool:
        return "-" in self.operators

    @property
    def answer_digits(self) -> int:
        widths = {"+": self.digits + 1, "-": self.digits, "*": 2 * self.digits}
        return max(widths[op] for op in self.operators)

    @property
    def result_len(self) -> int:
        """Characters of the result itself: its digits and, when signed, its sign."""
        return self.answer_digits + int(self.signed)

    @property
    def answer_len(self) -> int:
        """Every token the model writes after the prompt's '=' and before [EOS]: the working, then the result."""
        return self.work_len + self.result_len

    @property
    def work_len(self) -> int:
        """Tokens of working before the result (0 without ``show_work``: data/working.py)."""
        return 0 if self.working is None else self.working.length(self)

    @property
    def prompt_len(self) -> int:
        """[BOS] a op b = -> tokens before the answer."""
        return 1 + self.digits + 1 + self.digits + 1

    @property
    def seq_len(self) -> int:
        return self.prompt_len + self.answer_len + 1  # + [EOS]

    def answer_of(self, seq: torch.Tensor) -> torch.Tensor:
        """Where the answer sits: sequences (..., seq_len) -> their answer tokens (..., answer_len), the working and
        the result, without [EOS]. Every caller that reads or scores an answer reads it here."""
        return seq[..., self.prompt_len : self.prompt_len + self.answer_len]

    def prompt_of(self, seq: torch.Tensor) -> torch.Tensor:
        """Sequences (..., seq_len) -> their prompts (..., prompt_len): [BOS] a op b =, what a model is asked."""
        return seq[..., : self.prompt_len]

    def forced_answers(self, logits: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (B, answer_len + 1, vocab) -> the answer tokens their argmax writes, (B, answer_len)
        (each given the true ones before it; the last logits predict [EOS])."""
        return logits[:, : self.answer_len].argmax(-1)

    def exact_match(self, written: torch.Tensor, seq: torch.Tensor) -> torch.Tensor:
        """How an answer is scored: (B,) True where ``written`` (B, answer_len) is seq's whole answer, every token."""
        return (written == self.answer_of(seq)).all(dim=-1)

    def judge(self, written: torch.Tensor, seq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``written`` answers (B, answer_len) against seq's -> ((B,) exact match, (B, answer_len) each token right):
        exact-match and digit accuracy (the working, padding and sign included), as training and calc.py score."""
        right = written == self.answer_of(seq)
        return right.all(dim=-1), right

    # ---- problems as tensors: (a, op_idx, b), each (N,) int64; op_idx indexes ``operators`` ----------
    def operator_codes(self, op_idx: torch.Tensor) -> torch.Tensor:
        """op_idx -> the operator's place in OPERATORS: 0 '+', 1 '-', 2 '*'."""
        return lookup(tuple(OPERATORS.index(op) for op in self.operators), op_idx.device)[op_idx]

    def values(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The true results, vectorised."""
        codes = self.operator_codes(op_idx)
        return torch.where(codes == 0, a + b, torch.where(codes == 1, a - b, a * b))

    def split_of(
        self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor, val_fraction: float, test_fraction: float
    ) -> torch.Tensor:
        """Split id per problem (0 train, 1 val, 2 test): a fixed hash, independent of any seed."""
        h = mix(mix(a * 0x2545F4914F6CDD1D + op_idx) ^ b).remainder(1_000_000)
        test_cut = round(test_fraction * 1_000_000)
        val_cut = test_cut + round(val_fraction * 1_000_000)
        return torch.where(h < test_cut, 2, torch.where(h < val_cut, 1, 0))

    # ---- drawing problems: uniform operands below 10**digits, varied by ``draws`` where it is given ----------
    def check_vectorised(self) -> None:
        """ValueError unless int64 holds every value of this format: what drawing and encoding in bulk need
        (longer problems are written as text, one by one: data/text.py)."""
        limit = min(MAX_DIGITS[op] for op in self.operators)
        if self.digits > limit:
            raise ValueError(f"digits={self.digits}: at most {limit} with operators {self.operators!r}")

    def random_problems(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """n problems: (a, op_idx, b), each (n,) int64 on the generator's device; op_idx indexes ``operators``.
        Operands are uniform below 10**digits (and varied as ``draws`` says)."""
        high, device = 10**self.digits, generator.device
        a = torch.randint(high, (n,), generator=generator, device=device)
        b = torch.randint(high, (n,), generator=generator, device=device)
        if self.draws is not None:
            a, b = self.draws.varied(self, a, b, generator)  # mixed lengths, round numbers
        op_idx = torch.randint(len(self.operators), (n,), generator=generator, device=device)
        return (a, op_idx, b) if self.draws is None else self.draws.ordered(self, a, op_idx, b)  # larger first

    @property
    def n_problems(self) -> int:
        return len(self.operators) * 10 ** (2 * self.digits)

    def all_problems(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, ...]:
        """Every problem of this format (only sensible for small digit counts)."""
        high = 10**self.digits
        grid = torch.arange(self.n_problems, dtype=torch.int64, device=device)
        problems = (grid // high) % high, grid // (high * high), grid % high
        return problems if self.draws is None else self.draws.only_written(self, *problems)  # larger first


class ProblemEncoder:
    """Turns problems into token ids in bulk, with no per-problem Python (a test checks it against the text)."""

    def __init__(self, fmt: ProblemFormat, vocab: dict[str, int]):
        fmt.check_vectorised()
        self.fmt, self.vocab = fmt, vocab
        # token ids of digits 0-9, the operators and the signs '+'/'-'; as tensors: lookup
        self.digit_ids = tuple(vocab[str(d)] for d in range(10))
        self.op_ids = tuple(vocab[op] for op in fmt.operators)
        self.sign_ids = (vocab["+"], vocab["-"])
        self.bos, self.eq, self.eos = vocab["[BOS]"], vocab["="], vocab["[EOS]"]

    def encode(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(N,) problems -> (N, seq_len) token ids of the full training string, on the problems' device."""
        fmt, n, device = self.fmt, a.shape[0], a.device
        digit = lookup(self.digit_ids, device)  # (10,): digit -> its token id
        column = lambda token: torch.full((n, 1), token, dtype=torch.int64, device=device)  # noqa: E731
        value = fmt.values(a, op_idx, b)
        answer = digit[digits_of(value.abs(), fmt.answer_digits)]  # (N, answer_digits)
        if fmt.signed:
            answer = torch.cat([lookup(self.sign_ids, device)[(value < 0).long()].unsqueeze(1), answer], dim=1)
        if fmt.reverse_answer:
            answer = answer.flip(1)
        if fmt.working is not None:  # the working's (N, work_len) tokens before the result (data/working.py)
            answer = torch.cat([fmt.working.tokens(fmt, a, op_idx, b, self.vocab), answer], dim=1)
        prompt = [column(self.bos), digit[digits_of(a, fmt.digits)], lookup(self.op_ids, device)[op_idx].unsqueeze(1)]
        prompt += [digit[digits_of(b, fmt.digits)], column(self.eq)]
        return torch.cat([*prompt, answer, column(self.eos)], dim=1)


def answer_scores(logits: torch.Tensor, seq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """How a teacher-forced pass is scored, in training (the loss) and in every analysis: logits (B, answer_len + 1,
    vocab) predicting seq's answer and [EOS] tokens -> (the cross-entropy on them, (B,) every answer token is the
    argmax). A greedy decoder writes the whole answer right exactly when every answer token is the argmax given
    the true tokens before it, so the second value is greedy exact-match at the cost of one pass."""
    target = seq[:, -logits.shape[1] :]  # (B, answer_len + 1): the answer and [EOS], a sequence's last tokens
    loss = F.cross_entropy(logits.flatten(0, 1), target.flatten())  # mean over every answer and [EOS] token
    return loss, (logits[:, :-1].argmax(-1) == target[:, :-1]).all(dim=1)  # [EOS] aside: the answer's tokens
