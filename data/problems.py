"""Arithmetic problems: how one is written, its tokens, which split it belongs to, and where its answer sits.

A problem ``a <op> b`` is written as one fixed-length string, so a batch needs no padding:

    [BOS] a op b = answer [EOS]          e.g. 3-digit addition, reversed answer:
    [BOS] 123+045=8610 [EOS]             (123 + 45 = 168, written 0168 and reversed to 8610)

Operands are zero-padded to ``digits``; the answer is zero-padded to a fixed width and, with
``reverse_answer``, written least-significant digit first -- the order in which carries are computed,
so every answer digit depends only on what is already written (see the README for the measurement).
When subtraction is among the operators every answer also carries a sign ('+' or '-').

Splits are a pure function of the problem (a hash of a, op, b), so no test problem can ever be drawn
for training, whatever the seed, batch size or streaming mode; data/sampler.py draws the problems of a split.
Beside this file live the research options, off by default: the working of long multiplication before a '*'
result (``show_work``: data/working.py) and how operands are drawn (data/operands.py).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

import torch

from data.checks import check_whole
from data.operands import OperandDraws
from data.working import Working

OPERATORS = "+-*"
SPLITS = ("train", "val", "test")
# The exact-match share at which a task counts as done: the step learning curves mark and sweeps compare
# (steps_to_99), verify.py's pass mark, the longest length a model is said to answer.
MASTERED = 0.99


def mix(x: torch.Tensor) -> torch.Tensor:
    """A splitmix64-style integer hash on int64 (multiplication wraps around, which is what we want)."""
    x = x ^ (x >> 31)
    x = x * 0x62A9D9ED799705F5
    x = x ^ (x >> 28)
    x = x * 0x4BE98134A5976FD3
    return x ^ (x >> 32)


@functools.cache
def _table(values: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """A small int64 lookup table on ``device``, copied there once: each copy to a GPU waits for the GPU."""
    return torch.tensor(values, dtype=torch.int64, device=device)


def _digits_of(x: torch.Tensor, width: int) -> torch.Tensor:
    """(...) non-negative ints -> (..., width) decimal digits, most significant first."""
    powers = 10 ** torch.arange(width - 1, -1, -1, dtype=torch.int64, device=x.device)
    return (x.unsqueeze(-1) // powers) % 10


@dataclasses.dataclass(frozen=True)
class ProblemFormat:
    """How problems are written; stored in checkpoints so a model can be used without its config. It holds the
    working's layout (``working``: data/working.py) and how its problems are drawn (``draws``: random_problems,
    all_problems; data/operands.py)."""

    digits: int = 3
    operators: str = "+"
    reverse_answer: bool = True
    show_work: bool = False  # '*': the working of long multiplication before the result (data/working.py)
    mixed_lengths: float = 0.0  # the share of problems with operands of mixed lengths (data/operands.py)
    round_numbers: float = 0.0  # the share of operands drawn as round numbers (data/operands.py)
    larger_first: bool = False  # '-' problems with the larger operand first (data/operands.py)

    def __post_init__(self) -> None:
        given = self.operators
        ops = given if isinstance(given, str) else "".join(map(str, given)) if isinstance(given, Iterable) else ""
        object.__setattr__(self, "operators", ops)  # accept [+, -] as well as "+-"
        if not ops or any(op not in OPERATORS for op in ops) or len(set(ops)) != len(ops):
            raise ValueError(f"operators={given!r}: give one or more of '+', '-', '*', each once (e.g. '+-')")
        check_whole("digits", self.digits)
        for name in ("reverse_answer", "show_work", "larger_first"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be true or false")
        object.__setattr__(self, "working", Working(self))  # members, not fields: not saved, not compared
        object.__setattr__(self, "draws", OperandDraws(self))
        self.draws.check()
        self.working.check()

    def at_width(self, digits: int) -> ProblemFormat:
        """The same format with operands written ``digits`` wide (a model with places can answer other widths)."""
        return dataclasses.replace(self, digits=digits)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

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
        return self.working.length

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

    # ---- text ---------------------------------------------------------------------------------------
    def prompt_text(self, a: int, op: str, b: int) -> str:
        return f"{a:0{self.digits}d}{op}{b:0{self.digits}d}="

    def answer_text(self, value: int) -> str:
        plain = f"{abs(value):0{self.answer_digits}d}"
        if self.signed:
            plain = ("-" if value < 0 else "+") + plain
        return self.ordered(plain)

    def written_text(self, a: int, op: str, b: int) -> str:
        """Everything the model writes for ``a op b``: the working, then the result."""
        return self.working.text(a, op, b) + self.answer_text(self.evaluate(a, op, b))

    def ordered(self, plain: str) -> str:
        return plain[::-1] if self.reverse_answer else plain

    def parse_answer(self, text: str) -> int:
        """Inverse of :meth:`answer_text`; given all the model wrote, reads the result at its end (raises
        ValueError on a string that is not an answer)."""
        plain = self.ordered(self.working.result_text(text))  # reversing twice restores the order
        sign = 1
        if self.signed:
            sign, plain = (-1 if plain[0] == "-" else 1), plain[1:]
        if not plain.isdigit():
            raise ValueError(f"not an answer: {text!r}")
        return sign * int(plain)

    @staticmethod
    def evaluate(a: int, op: str, b: int) -> int:
        return a + b if op == "+" else a - b if op == "-" else a * b

    # ---- problems as tensors: (a, op_idx, b), each (N,) int64; op_idx indexes ``operators`` ----------
    def operator_codes(self, op_idx: torch.Tensor) -> torch.Tensor:
        """op_idx -> the operator's place in OPERATORS: 0 '+', 1 '-', 2 '*'."""
        return _table(tuple(OPERATORS.index(op) for op in self.operators), op_idx.device)[op_idx]

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


class ProblemEncoder:
    """Turns problems into token ids in bulk, with no per-problem Python (a test checks it against the text)."""

    def __init__(self, fmt: ProblemFormat, vocab: dict[str, int]):
        fmt.draws.check_vectorised()
        self.fmt, self.vocab = fmt, vocab
        # token ids of digits 0-9, the operators, the signs '+'/'-' and the work separators; as tensors: _table
        self.digit_ids = tuple(vocab[str(d)] for d in range(10))
        self.op_ids = tuple(vocab[op] for op in fmt.operators)
        self.sign_ids = (vocab["+"], vocab["-"])
        self.bos, self.eq, self.eos = vocab["[BOS]"], vocab["="], vocab["[EOS]"]
        self.work_separator_ids = tuple(vocab[c] for c in fmt.working.separators)

    def encode_problems(self, problems) -> torch.Tensor:
        """Problems with ``.a``, ``.op``, ``.b`` (e.g. parsed expressions) -> (N, seq_len) token ids."""
        a = torch.tensor([p.a for p in problems], dtype=torch.int64)
        op_idx = torch.tensor([self.fmt.operators.index(p.op) for p in problems], dtype=torch.int64)
        b = torch.tensor([p.b for p in problems], dtype=torch.int64)
        return self.encode(a, op_idx, b)

    def encode(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(N,) problems -> (N, seq_len) token ids of the full training string, on the problems' device."""
        fmt, n, device = self.fmt, a.shape[0], a.device
        digit = _table(self.digit_ids, device)  # (10,): digit -> its token id
        column = lambda token: torch.full((n, 1), token, dtype=torch.int64, device=device)  # noqa: E731
        value = fmt.values(a, op_idx, b)
        answer = digit[_digits_of(value.abs(), fmt.answer_digits)]  # (N, answer_digits)
        if fmt.signed:
            answer = torch.cat([_table(self.sign_ids, device)[(value < 0).long()].unsqueeze(1), answer], dim=1)
        # the working (data/working.py): (N, work_lines, answer_digits), no lines without show_work
        work = digit[_digits_of(fmt.working.values(a, op_idx, b), fmt.answer_digits)]
        if fmt.reverse_answer:
            answer, work = answer.flip(1), work.flip(2)
        separators = _table(self.work_separator_ids, device).expand(n, -1).unsqueeze(2)  # (N, work_lines, 1)
        work = torch.cat([work, separators], dim=2).flatten(1)  # (N, work_len)
        prompt = [column(self.bos), digit[_digits_of(a, fmt.digits)], _table(self.op_ids, device)[op_idx].unsqueeze(1)]
        prompt += [digit[_digits_of(b, fmt.digits)], column(self.eq)]
        return torch.cat([*prompt, work, answer, column(self.eos)], dim=1)
