"""Division with remainder, beside the lesson's ``a op b``: ``a/b`` (b > 0) answered with its quotient then its
remainder, each ``digits`` wide, the pair written as one number in the format's digit order:

    [BOS] 017/005=003002 [EOS]           17 / 5 = 3 r 2, most significant digit first (reverse_answer=false)
    [BOS] 17/05=2030+ [EOS]              the same in 2-digit '+-*/' (reversed, signed): 0302 -> 2030, then its sign

:class:`DividingFormat` is what :class:`data.problems.ProblemFormat` is, knowing '/' as well, and every operation
data/operations.py registers (data/build.py builds it wherever one is among the operators): the lesson's layout,
encoder, splits and scoring, with the division's results, widths and draws (a zero divisor is never drawn) in its own
methods. A model that divides has one token
more, '/', after the lesson's vocabulary (:func:`tokenizer_for`), so every other token keeps its id. Long
division's steps, written before the result: data/long_division.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch
from tokenizers import AddedToken

from data.operations import LESSON, OPERATIONS, symbols
from data.problems import MAX_DIGITS, ProblemFormat, lookup
from data.tokenizer import CharTokenizer


def _joined(operators) -> str:
    """``operators`` as a config may give them (a string, or a list) as one string."""
    return operators if isinstance(operators, str) else "".join(map(str, operators or ""))


def divides(operators) -> bool:
    """Whether ``operators`` hold '/'."""
    return "/" in _joined(operators)


def beyond_lesson(operators) -> bool:
    """Whether ``operators`` hold one the lesson's format does not write: a registered one (data/operations.py),
    or one no format writes (whose error :class:`DividingFormat` then gives, naming every operator there is)."""
    ops = _joined(operators)
    return bool(ops) and not set(ops) <= set(LESSON)


@dataclasses.dataclass(frozen=True)
class DividingFormat:
    """A :class:`ProblemFormat` whose operators may hold '/' or any operation data/operations.py registers: the same
    settings, the lesson's layout and scoring read from ProblemFormat itself (written once, as data/sums.py's are),
    its results, widths and draws its own, each registered operation's from its :class:`data.operation.Operation`."""

    digits: int = 3
    operators: str = "/"
    reverse_answer: bool = True
    show_work: bool = False
    mixed_lengths: float = 0.0
    round_numbers: float = 0.0
    larger_first: bool = False
    working: object = dataclasses.field(default=None, compare=False, repr=False)
    draws: object = dataclasses.field(default=None, compare=False, repr=False)

    at_width, to_dict, signed = ProblemFormat.at_width, ProblemFormat.to_dict, ProblemFormat.signed
    result_len, answer_len, work_len = ProblemFormat.result_len, ProblemFormat.answer_len, ProblemFormat.work_len
    prompt_len, seq_len, split_of = ProblemFormat.prompt_len, ProblemFormat.seq_len, ProblemFormat.split_of
    answer_of, prompt_of, forced_answers = (
        ProblemFormat.answer_of,
        ProblemFormat.prompt_of,
        ProblemFormat.forced_answers,
    )
    exact_match, judge = ProblemFormat.exact_match, ProblemFormat.judge

    def __post_init__(self) -> None:
        given = self.operators
        ops = given if isinstance(given, str) else "".join(map(str, given)) if isinstance(given, Iterable) else ""
        object.__setattr__(self, "operators", ops)
        if not ops or any(op not in symbols() for op in ops) or len(set(ops)) != len(ops):
            every = ", ".join(repr(op) for op in symbols())
            raise ValueError(f"operators={given!r}: give one or more of {every}, each once (e.g. '+/')")
        rest = "".join(op for op in ops if op in LESSON) or "+"  # the lesson's checks of every other setting
        ProblemFormat(**(self.to_dict() | {"operators": rest}), working=self.working, draws=self.draws)

    @property
    def answer_digits(self) -> int:
        """The widest result of the format's operators: each registered one's own (a division's quotient and
        remainder side by side, ``2 * digits``), the lesson's as the lesson writes them."""
        lesson = "".join(op for op in self.operators if op in LESSON)
        widths = [OPERATIONS[op].answer_digits(self.digits) for op in self.operators if op in OPERATIONS]
        return max(widths + ([ProblemFormat(self.digits, lesson).answer_digits] if lesson else []))

    def operator_codes(self, op_idx: torch.Tensor) -> torch.Tensor:
        """op_idx -> the operator's place in data/operations.py's ``symbols()``: 0 '+', 1 '-', 2 '*', 3 '/', ..."""
        return lookup(tuple(symbols().index(op) for op in self.operators), op_idx.device)[op_idx]

    def of(self, op_idx: torch.Tensor, symbol: str) -> torch.Tensor:
        """(N,) True where the problem's operator is ``symbol``."""
        return self.operator_codes(op_idx) == symbols().index(symbol)

    def divisions(self, op_idx: torch.Tensor) -> torch.Tensor:
        """(N,) True where the problem is a division."""
        return self.of(op_idx, "/")

    def nonzero_b(self, op_idx: torch.Tensor) -> torch.Tensor:
        """(N,) True where the problem's operation never takes b = 0 (a division)."""
        nonzero = tuple(op in OPERATIONS and OPERATIONS[op].nonzero_b for op in self.operators)
        return lookup(tuple(map(int, nonzero)), op_idx.device)[op_idx].bool()

    def values(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The true results as written: the lesson's, and each registered operation's ``values`` where it is the
        problem's (a division's quotient and remainder side by side, q * 10**digits + r)."""
        codes = self.operator_codes(op_idx)
        values = torch.where(codes == 0, a + b, torch.where(codes == 1, a - b, a * b))
        for op in self.operators:
            if op in OPERATIONS:  # b > 0 where its operation takes none (random_problems, all_problems)
                values = torch.where(codes == symbols().index(op), OPERATIONS[op].values(a, b, self.digits), values)
        return values

    def check_vectorised(self) -> None:
        limit = min(MAX_DIGITS[op] if op in LESSON else OPERATIONS[op].max_digits for op in self.operators)
        if self.digits > limit:
            raise ValueError(f"digits={self.digits}: at most {limit} with operators {self.operators!r}")

    def random_problems(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """The lesson's draws, a zero b drawn again where the operation takes none, uniform in [1, b's bound)."""
        a, op_idx, b = ProblemFormat.random_problems(self, n, generator)
        bound = self.draws.bound(self) if hasattr(self.draws, "bound") else 10**self.digits  # a short b's
        again = torch.randint(1, bound, (len(b),), generator=generator, device=b.device)
        return a, op_idx, torch.where(self.nonzero_b(op_idx) & (b == 0), again, b)

    @property
    def n_problems(self) -> int:
        """How many problems the layout holds (a division by zero is none)."""
        never_zero = sum(op in OPERATIONS and OPERATIONS[op].nonzero_b for op in self.operators)
        return len(self.operators) * 10 ** (2 * self.digits) - never_zero * 10**self.digits

    def all_problems(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, ...]:
        """Every problem of this format, as the lesson lists them, but a division by zero."""
        high = 10**self.digits
        grid = torch.arange(len(self.operators) * high * high, dtype=torch.int64, device=device)
        a, op_idx, b = (grid // high) % high, grid // (high * high), grid % high
        keep = ~(self.nonzero_b(op_idx) & (b == 0))
        problems = a[keep], op_idx[keep], b[keep]
        return problems if self.draws is None else self.draws.only_written(self, *problems)


def tokenizer_for(fmt) -> CharTokenizer:
    """The tokenizer of a model trained on ``fmt`` (a format with ``operators``): the lesson's, then the symbol of
    each registered operation it does, in data/operations.py's order ('/' first)."""
    tokenizer, added = CharTokenizer(), [op for op in OPERATIONS if op in _joined(fmt.operators)]
    if added:
        tokenizer.tokenizer.add_tokens([AddedToken(op, single_word=False, normalized=False) for op in added])
        tokenizer = CharTokenizer(tokenizer.tokenizer)
    return tokenizer
