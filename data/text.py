"""Problems as text: how a problem and its answer are written as characters, and how a written answer is read.

A run never writes a problem as text -- the encoder makes its tokens from tensors (data/problems.py:
:class:`ProblemEncoder`, checked token for token against these strings by tests/test_data.py). Text is for
``calc.py``, ``verify.py``, the analyses and the lab: each function takes the :class:`ProblemFormat` it writes.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import torch

from data.problems import ProblemEncoder, ProblemFormat


def encode_problems(encoder: ProblemEncoder, problems) -> torch.Tensor:
    """Problems with ``.a``, ``.op``, ``.b`` (e.g. parsed expressions) -> (N, seq_len) token ids, by ``encoder``."""
    a = torch.tensor([p.a for p in problems], dtype=torch.int64)
    op_idx = torch.tensor([encoder.fmt.operators.index(p.op) for p in problems], dtype=torch.int64)
    b = torch.tensor([p.b for p in problems], dtype=torch.int64)
    return encoder.encode(a, op_idx, b)


class Quotient(NamedTuple):
    """A division's result: its quotient and remainder, written ``3 r 2`` (17/5) wherever a result is shown."""

    quotient: int
    remainder: int

    def __str__(self) -> str:
        return f"{self.quotient} r {self.remainder}"


def as_json(value: int | Quotient | None) -> int | str | None:
    """A result as a JSON record holds it: a number, or a division's ``3 r 2`` as it is shown."""
    return str(value) if isinstance(value, Quotient) else value


def evaluate(a: int, op: str, b: int) -> int | Quotient:
    """The true result of ``a op b``, in Python's unbounded ints (b > 0 for '/')."""
    if op == "/":
        return Quotient(*divmod(a, b))
    return a + b if op == "+" else a - b if op == "-" else a * b


def allow_digits(n: int) -> None:
    """Let Python turn whole numbers of up to ``n`` digits into text and back: it refuses beyond 4,300 digits by
    default (``sys.set_int_max_str_digits``, a guard against the quadratic cost of converting untrusted text; our
    inputs are bounded, calc.py's by its line limit). Never lowers the limit, nor sets one where there is none."""
    limit = sys.get_int_max_str_digits()
    if limit and limit < n:
        sys.set_int_max_str_digits(n)


def prompt_text(fmt: ProblemFormat, a: int, op: str, b: int) -> str:
    """What the model is asked, [BOS] aside: ``a op b =``, operands zero-padded to ``fmt.digits``."""
    return f"{a:0{fmt.digits}d}{op}{b:0{fmt.digits}d}="


def ordered(fmt: ProblemFormat, plain: str) -> str:
    """A number's characters in the answer's digit order (reversed with ``reverse_answer``)."""
    return plain[::-1] if fmt.reverse_answer else plain


def answer_text(fmt: ProblemFormat, value: int | Quotient) -> str:
    """The result ``value`` as the model writes it: zero-padded, signed when '-' is an operator, in digit order; a
    division's quotient and remainder each ``fmt.digits`` wide, side by side as one number (data/division.py)."""
    if isinstance(value, Quotient):
        value = value.quotient * 10**fmt.digits + value.remainder
    plain = f"{abs(value):0{fmt.answer_digits}d}"
    if fmt.signed:
        plain = ("-" if value < 0 else "+") + plain
    return ordered(fmt, plain)


def written_text(fmt: ProblemFormat, a: int, op: str, b: int) -> str:
    """Everything the model writes for ``a op b``: the working (data/working.py), then the result."""
    work = "" if fmt.working is None else fmt.working.text(fmt, a, op, b)
    return work + answer_text(fmt, evaluate(a, op, b))


def result_text(fmt: ProblemFormat, written: str) -> str:
    """The result at the end of everything the model wrote (all of it without working)."""
    return written if fmt.working is None else fmt.working.result_text(fmt, written)


def parse_answer(fmt: ProblemFormat, text: str, op: str | None = None) -> int | Quotient:
    """Inverse of :func:`answer_text`; given all the model wrote for a problem of ``op`` (None: the format's only
    operator, or one that is not '/'), reads the result at its end (raises ValueError on a string that is not an
    answer)."""
    plain = ordered(fmt, result_text(fmt, text))  # reversing twice restores the order
    if (op or fmt.operators[0] if len(fmt.operators) == 1 else op) == "/":
        digits = plain[1:] if fmt.signed and plain[:1] == "+" else plain if not fmt.signed else ""
        if not digits.isdigit():
            raise ValueError(f"not a quotient and remainder: {text!r}")
        return Quotient(int(digits[: -fmt.digits] or 0), int(digits[-fmt.digits :]))
    sign = 1
    if fmt.signed:
        sign, plain = (-1 if plain[0] == "-" else 1), plain[1:]
    if not plain.isdigit():
        raise ValueError(f"not an answer: {text!r}")
    return sign * int(plain)
