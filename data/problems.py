"""Arithmetic problems: how they are written, which split each belongs to, and how batches are drawn.

A problem ``a <op> b`` is written as one fixed-length string, so a batch needs no padding:

    [BOS] a op b = answer [EOS]          e.g. 3-digit addition, reversed answer:
    [BOS] 123+045=8610 [EOS]             (123 + 45 = 168, written 0168 and reversed to 8610)

Operands are zero-padded to ``digits``; the answer is zero-padded to a fixed width and, with
``reverse_answer``, written least-significant digit first -- the order in which carries are computed,
so every answer digit depends only on what is already written (see the README for the measurement).
When subtraction is among the operators every answer also carries a sign ('+' or '-').

With ``show_work`` a '*' answer is preceded by the working of long multiplication, one line per step, each
line as wide as the answer and written in the answer's digit order:

    12*34=  0048+0360=  0408        a*b_0, + a*b_1*10, = the product (plain digits shown; spaces added)
    123*456=  000738+006150=006888+049200=  056088    with 3 digits: a running sum between partial products

so every digit the model writes is the sum of two digits above it plus a carry, or one digit of a times
one digit of b plus a carry, whatever the operand size (Deng et al. 2023 write products this way).
'+' and '-' problems in the same format need no working: their lines are zeros.

Splits are a pure function of the problem (a hash of a, op, b), so no test problem can ever be drawn
for training, whatever the seed, batch size or streaming mode.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import torch

OPERATORS = "+-*"
# The widest operands int64 arithmetic can hold: a*b must stay below 2**63 for '*', a+b for '+'/'-'.
MAX_DIGITS = {"+": 17, "-": 17, "*": 9}
SPLITS = ("train", "val", "test")
# The exact-match share at which a task counts as done: the step learning curves mark and sweeps compare
# (steps_to_99), verify.py's pass mark, the longest length a model is said to answer.
MASTERED = 0.99
_ENUMERATE_LIMIT = 4_000_000  # problem spaces up to this size are listed in full when sampling held-out sets


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


@dataclass(frozen=True)
class ProblemFormat:
    """How problems are written; stored in checkpoints so a model can be used without its config."""

    digits: int = 3
    operators: str = "+"
    reverse_answer: bool = True
    show_work: bool = False  # '*': write the partial products and running sums before the answer
    # The share of problems whose operands are of mixed lengths: each operand's digit count uniform in 1..digits,
    # then its digits uniform (zero-padded to ``digits`` as always); the rest uniform over all values, where 9 in
    # 10 have ``digits`` digits. true = 1.0, false = 0.0.
    mixed_lengths: float = 0.0
    # The share of operands drawn as round numbers: a run of random digits of uniform length 1..digits, then a
    # uniform number of zeros that keeps it within ``digits`` (5000000000, 120000, 7): carries out of a column
    # with nothing but zeros below it, which uniform operands almost never have.
    round_numbers: float = 0.0
    # '-' problems written with the larger operand first (a >= b), so no result is negative: a result's sign needs
    # the whole of both numbers compared, while its digits and borrows need only neighbouring places.
    larger_first: bool = False

    def __post_init__(self) -> None:
        given = self.operators
        ops = given if isinstance(given, str) else "".join(map(str, given)) if isinstance(given, Iterable) else ""
        object.__setattr__(self, "operators", ops)  # accept [+, -] as well as "+-"
        if not ops or any(op not in OPERATORS for op in ops) or len(set(ops)) != len(ops):
            raise ValueError(f"operators={given!r}: give one or more of '+', '-', '*', each once (e.g. '+-')")
        if not isinstance(self.digits, int) or isinstance(self.digits, bool) or self.digits < 1:
            raise ValueError(f"digits={self.digits!r}: must be a whole number >= 1")
        for name in ("reverse_answer", "show_work", "larger_first"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be true or false")
        for name in ("mixed_lengths", "round_numbers"):
            share = getattr(self, name)
            if not isinstance(share, (bool, int, float)) or not 0 <= share <= 1:
                raise ValueError(f"{name}={share!r}: must be true, false or a share in [0, 1]")
            object.__setattr__(self, name, float(share))  # true -> 1.0: one format, one hash
        if self.show_work and "*" not in self.operators:
            raise ValueError(
                f"show_work=true: only '*' problems have working to show, and operators={self.operators!r}; "
                "add '*' or set show_work=false"
            )

    def check_vectorised(self) -> None:
        """ValueError unless int64 holds every value of this format: what drawing and encoding in bulk need
        (longer problems are written as text, one by one: :meth:`written_text`)."""
        limit = min(MAX_DIGITS[op] for op in self.operators)
        if self.digits > limit:
            raise ValueError(f"digits={self.digits}: at most {limit} with operators {self.operators!r}")

    def at_width(self, digits: int) -> ProblemFormat:
        """The same format with operands written ``digits`` wide (a model with places can answer other widths)."""
        return dataclasses.replace(self, digits=digits)

    # ---- layout -------------------------------------------------------------------------------------
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
    def work_lines(self) -> int:
        """Lines of working before a '*' result: d partial products and the d - 2 running sums between them."""
        return 2 * self.digits - 2 if self.show_work else 0  # show_work implies '*' (__post_init__)

    @property
    def work_len(self) -> int:
        return self.work_lines * (self.answer_digits + 1)  # each line, then '+' or '='

    @property
    def answer_len(self) -> int:
        """Every token the model writes after the prompt's '=' and before [EOS]: the working, then the result."""
        return self.work_len + self.result_len

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

    def exact_match(self, written: torch.Tensor, seq: torch.Tensor) -> torch.Tensor:
        """How an answer is scored: (B,) True where ``written`` (B, answer_len) is seq's whole answer, every token."""
        return (written == self.answer_of(seq)).all(dim=-1)

    @property
    def n_problems(self) -> int:
        return len(self.operators) * 10 ** (2 * self.digits)

    def to_dict(self) -> dict:
        return asdict(self)

    # ---- text ---------------------------------------------------------------------------------------
    def prompt_text(self, a: int, op: str, b: int) -> str:
        return f"{a:0{self.digits}d}{op}{b:0{self.digits}d}="

    def answer_text(self, value: int) -> str:
        plain = f"{abs(value):0{self.answer_digits}d}"
        if self.signed:
            plain = ("-" if value < 0 else "+") + plain
        return self._ordered(plain)

    def work_text(self, a: int, op: str, b: int) -> str:
        """The working written before the result ('' without ``show_work``)."""
        if not self.work_len:
            return ""
        lines = self.work_values(torch.tensor([a]), torch.tensor([self.operators.index(op)]), torch.tensor([b]))
        return "".join(
            self._ordered(f"{int(v):0{self.answer_digits}d}") + sep
            for v, sep in zip(lines[0].tolist(), self.work_separators, strict=True)
        )

    def written_text(self, a: int, op: str, b: int) -> str:
        """Everything the model writes for ``a op b``: the working, then the result."""
        return self.work_text(a, op, b) + self.answer_text(self.evaluate(a, op, b))

    def _ordered(self, plain: str) -> str:
        return plain[::-1] if self.reverse_answer else plain

    def result_text(self, written: str) -> str:
        """The result at the end of everything the model wrote (the whole text when no working is shown)."""
        return written[-self.result_len :] if self.work_len else written

    def parse_answer(self, text: str) -> int:
        """Inverse of :meth:`answer_text`; given all the model wrote, reads the result at its end (raises
        ValueError on a string that is not an answer)."""
        plain = self._ordered(self.result_text(text))  # reversing twice restores the order
        sign = 1
        if self.signed:
            sign, plain = (-1 if plain[0] == "-" else 1), plain[1:]
        if not plain.isdigit():
            raise ValueError(f"not an answer: {text!r}")
        return sign * int(plain)

    @staticmethod
    def evaluate(a: int, op: str, b: int) -> int:
        return a + b if op == "+" else a - b if op == "-" else a * b

    # ---- splits -------------------------------------------------------------------------------------
    def split_of(
        self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor, val_fraction: float, test_fraction: float
    ) -> torch.Tensor:
        """Split id per problem (0 train, 1 val, 2 test): a fixed hash, independent of any seed."""
        h = mix(mix(a * 0x2545F4914F6CDD1D + op_idx) ^ b).remainder(1_000_000)
        test_cut = round(test_fraction * 1_000_000)
        val_cut = test_cut + round(val_fraction * 1_000_000)
        return torch.where(h < test_cut, 2, torch.where(h < val_cut, 1, 0))

    # ---- sampling -----------------------------------------------------------------------------------
    def random_problems(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """n uniform problems: (a, op_idx, b), each (n,) int64 on the generator's device; op_idx indexes
        ``self.operators``."""
        high, device = 10**self.digits, generator.device
        a = torch.randint(high, (n,), generator=generator, device=device)
        b = torch.randint(high, (n,), generator=generator, device=device)
        if self.mixed_lengths:
            (short_a, _), (short_b, _) = self._of_random_length(a, generator), self._of_random_length(b, generator)
            if self.mixed_lengths < 1:  # (n,) which problems get them (at 1, all: no draw)
                mixed = torch.rand(n, generator=generator, device=device) < self.mixed_lengths
                short_a, short_b = torch.where(mixed, short_a, a), torch.where(mixed, short_b, b)
            a, b = short_a, short_b
        if self.round_numbers:
            a, b = self._rounded(a, generator), self._rounded(b, generator)
        op_idx = torch.randint(len(self.operators), (n,), generator=generator, device=device)
        return self.ordered(a, op_idx, b)

    def ordered(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(a, op_idx, b) as this format writes them: with ``larger_first``, a '-' problem's operands swapped where
        a < b."""
        if not self.larger_first:
            return a, op_idx, b
        swap = self.smaller_first(a, op_idx, b)
        return torch.where(swap, b, a), op_idx, torch.where(swap, a, b)

    def smaller_first(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(n,) bool: the '-' problems whose smaller operand comes first, which ``larger_first`` never writes."""
        return (self.operator_codes(op_idx) == OPERATORS.index("-")) & (a < b)

    def _of_random_length(self, x: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) uniform values below 10**digits -> (values of a uniform length 1..digits each, uniform within it;
        those (n,) lengths)."""
        length = torch.randint(1, self.digits + 1, x.shape, generator=generator, device=x.device)
        low = torch.where(length == 1, 0, 10 ** (length - 1))  # (n,) the smallest value of that length
        return low + x % (10**length - low), length  # the remainder's bias is below 10**(length - digits)

    def _rounded(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """(n,) values -> the share ``round_numbers`` of them replaced by round numbers (see the field)."""
        run, length = self._of_random_length(x, generator)  # (n,) a run of digits, (n,) its length
        zeros = (torch.rand(x.shape, generator=generator, device=x.device) * (self.digits - length + 1)).long()
        picked = torch.rand(x.shape, generator=generator, device=x.device) < self.round_numbers
        return torch.where(picked, run * 10**zeros, x)

    def all_problems(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, ...]:
        """Every problem of this format (only sensible for small digit counts)."""
        high = 10**self.digits
        grid = torch.arange(self.n_problems, dtype=torch.int64, device=device)
        a, op_idx, b = (grid // high) % high, grid // (high * high), grid % high
        if self.larger_first:  # only the problems this format writes
            keep = ~self.smaller_first(a, op_idx, b)
            a, op_idx, b = a[keep], op_idx[keep], b[keep]
        return a, op_idx, b

    def operator_codes(self, op_idx: torch.Tensor) -> torch.Tensor:
        """op_idx (indexes ``self.operators``) -> the operator's place in OPERATORS: 0 '+', 1 '-', 2 '*'."""
        return _table(tuple(OPERATORS.index(op) for op in self.operators), op_idx.device)[op_idx]

    def values(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The true results, vectorised."""
        codes = self.operator_codes(op_idx)
        return torch.where(codes == 0, a + b, torch.where(codes == 1, a - b, a * b))

    @staticmethod
    def work_line(i: int) -> tuple[str, int]:
        """What work line i holds: ("product", j) for q_j = a * b_j * 10^j, ("sum", j) for s_j = q_0 + ... + q_j.
        The lines run q_0, q_1, s_1, q_2, s_2, ..., q_{d-1}; the result s_{d-1} follows them."""
        return ("product", (i + 1) // 2) if i == 0 or i % 2 == 1 else ("sum", i // 2)

    @property
    def work_separators(self) -> str:
        """The character after each work line: q_0 + q_1 = s_1 + q_2 = s_2 ... + q_{d-1} = (then the result)."""
        adds_next = lambda i: i == 0 or self.work_line(i)[0] == "sum"  # noqa: E731 (then a product is added)
        return "".join("+" if adds_next(i) else "=" for i in range(self.work_lines))

    def work_values(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(N,) problems -> (N, work_lines) values of the working: for '*' the partial products
        q_j = a * b_j * 10^j (b_j: b's digit j) and the running sums s_j = q_0 + ... + q_j between them, in the
        order q_0, q_1, s_1, q_2, s_2, ..., q_{d-1}; zeros for '+' and '-'."""
        lines = []
        for i in range(self.work_lines):
            kind, j = self.work_line(i)
            lines.append(a * ((b // 10**j) % 10) * 10**j if kind == "product" else a * (b % 10 ** (j + 1)))
        if not lines:
            return torch.zeros(len(a), 0, dtype=torch.int64, device=a.device)
        is_product = (self.operator_codes(op_idx) == 2).unsqueeze(1)
        return torch.where(is_product, torch.stack(lines, dim=1), 0)


@functools.cache
def width_of(fmt: ProblemFormat, seq_len: int) -> ProblemFormat:
    """``fmt`` at the width whose sequences are ``seq_len`` tokens long (ValueError if none is)."""
    for digits in range(1, seq_len):
        if fmt.at_width(digits).seq_len == seq_len:
            return fmt.at_width(digits)
    raise ValueError(f"no width of {fmt.operators!r} problems makes sequences of {seq_len} tokens")


class ProblemEncoder:
    """Turns problems into token ids in bulk, with no per-problem Python.

    It uses the tokenizer's vocabulary, and a test checks it against ``tokenizer.encode`` of the text.
    """

    def __init__(self, fmt: ProblemFormat, vocab: dict[str, int]):
        fmt.check_vectorised()
        self.fmt, self.vocab = fmt, vocab
        # token ids of digits 0-9, the operators, the signs '+'/'-' and the work separators; as tensors: _table
        self.digit_ids = tuple(vocab[str(d)] for d in range(10))
        self.op_ids = tuple(vocab[op] for op in fmt.operators)
        self.sign_ids = (vocab["+"], vocab["-"])
        self.bos, self.eq, self.eos = vocab["[BOS]"], vocab["="], vocab["[EOS]"]
        self.work_separator_ids = tuple(vocab[c] for c in fmt.work_separators)

    def encode_problems(self, problems) -> torch.Tensor:
        """Problems with ``.a``, ``.op``, ``.b`` (e.g. parsed expressions) -> (N, seq_len) token ids."""
        a = torch.tensor([p.a for p in problems], dtype=torch.int64)
        op_idx = torch.tensor([self.fmt.operators.index(p.op) for p in problems], dtype=torch.int64)
        b = torch.tensor([p.b for p in problems], dtype=torch.int64)
        return self.encode(a, op_idx, b)

    def encode(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(N,) problems -> (N, seq_len) token ids of the full training string, on the problems' device."""
        fmt, n, device = self.fmt, a.shape[0], a.device
        digit_ids = _table(self.digit_ids, device)  # (10,)
        value = fmt.values(a, op_idx, b)
        answer = digit_ids[_digits_of(value.abs(), fmt.answer_digits)]  # (N, answer_digits)
        if fmt.signed:
            signs = _table(self.sign_ids, device)[(value < 0).long()]  # (N,)
            answer = torch.cat([signs.unsqueeze(1), answer], dim=1)
        if fmt.reverse_answer:
            answer = answer.flip(1)
        work = digit_ids[_digits_of(fmt.work_values(a, op_idx, b), fmt.answer_digits)]  # (N, lines, width)
        if fmt.reverse_answer:
            work = work.flip(2)
        separators = _table(self.work_separator_ids, device).expand(n, -1).unsqueeze(2)  # (N, lines, 1)
        work = torch.cat([work, separators], dim=2).flatten(1)  # (N, work_len)
        column = lambda token: torch.full((n, 1), token, dtype=torch.int64, device=device)  # noqa: E731
        return torch.cat(
            [
                column(self.bos),
                digit_ids[_digits_of(a, fmt.digits)],
                _table(self.op_ids, device)[op_idx].unsqueeze(1),
                digit_ids[_digits_of(b, fmt.digits)],
                column(self.eq),
                work,
                answer,
                column(self.eos),
            ],
            dim=1,
        )


class ProblemSampler:
    """Draws problems of one split: held-out sets once, training batches as a fresh stream."""

    def __init__(self, fmt: ProblemFormat, val_fraction: float = 0.01, test_fraction: float = 0.01):
        for name, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 0.5:
                raise ValueError(f"{name}={value!r}: must be in (0, 0.5)")
        fmt.check_vectorised()
        self.fmt = fmt
        self.fractions = {"val": val_fraction, "test": test_fraction}
        self.train_fraction = 1.0 - val_fraction - test_fraction

    def _split(self, a, op_idx, b) -> torch.Tensor:
        return self.fmt.split_of(a, op_idx, b, self.fractions["val"], self.fractions["test"])

    def sample(self, split: str, n: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """n problems of ``split``. Held-out sets are distinct problems (capped at the split's size);
        training draws are independent, so a stream may repeat a problem, as sampling with replacement does."""
        split_id = SPLITS.index(split)
        if split != "train" and self.fmt.n_problems <= _ENUMERATE_LIMIT:
            a, op_idx, b = self.fmt.all_problems(generator.device)
            keep = (self._split(a, op_idx, b) == split_id).nonzero().squeeze(1)
            pick = keep[torch.randperm(len(keep), generator=generator, device=generator.device)[:n]]
            return a[pick], op_idx[pick], b[pick]
        fraction = self.train_fraction if split == "train" else self.fractions[split]
        parts, have, seen = (
            [(torch.zeros(0, dtype=torch.int64, device=generator.device),) * 3],
            0,
            set(),
        )  # empty start: n=0 works too
        while have < n:
            want = math.ceil((n - have) / fraction * 1.1) + 64
            a, op_idx, b = self.fmt.random_problems(want, generator)
            keep = self._split(a, op_idx, b) == split_id
            if split != "train":  # held-out sets hold distinct problems
                for i in keep.nonzero().squeeze(1).tolist():
                    key = (int(a[i]), int(op_idx[i]), int(b[i]))
                    keep[i] = key not in seen
                    seen.add(key)
            kept = keep.nonzero().squeeze(1)  # on a GPU, the draw's one wait: how many were kept
            a, op_idx, b = a[kept], op_idx[kept], b[kept]
            parts.append((a, op_idx, b))
            have += len(a)
        a, op_idx, b = (torch.cat(t)[:n] for t in zip(*parts, strict=True))
        return a, op_idx, b
