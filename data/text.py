"""Problems as text: how a problem and its answer are written as characters, and how a written answer is read.

A run never writes a problem as text -- the encoder makes its tokens from tensors (data/problems.py:
:class:`ProblemEncoder`, checked token for token against these strings by tests/test_data.py). Text is for
``calc.py``, ``verify.py``, the analyses and the lab: each function takes the :class:`ProblemFormat` it writes.
"""

from __future__ import annotations

import sys

import torch

from data.operations import OPERATIONS
from data.problems import ProblemEncoder, ProblemFormat


def encode_problems(encoder: ProblemEncoder, problems) -> torch.Tensor:
    """Problems with ``.a``, ``.op``, ``.b`` (e.g. parsed expressions) -> (N, seq_len) token ids, by ``encoder``."""
    a = torch.tensor([p.a for p in problems], dtype=torch.int64)
    op_idx = torch.tensor([encoder.fmt.operators.index(p.op) for p in problems], dtype=torch.int64)
    b = torch.tensor([p.b for p in problems], dtype=torch.int64)
    return encoder.encode(a, op_idx, b)


def as_json(value) -> int | str | None:
    """A result as a JSON record holds it: a number, or one that is not (a division's ``3 r 2``) as it is shown."""
    return value if value is None or isinstance(value, int) else str(value)


def evaluate(a: int, op: str, b: int):
    """The true result of ``a op b``, in Python's unbounded ints (b > 0 where the operation never divides by 0):
    an int, or what the registered operation gives (a division's :class:`Quotient`)."""
    if op in OPERATIONS:
        return OPERATIONS[op].evaluate(a, b)
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


def answer_text(fmt: ProblemFormat, value) -> str:
    """The result ``value`` as the model writes it: zero-padded, signed when '-' is an operator, in digit order; a
    result that is not an int as its ``written`` number (a division's quotient and remainder each ``fmt.digits``
    wide, side by side: data/quotient.py)."""
    if not isinstance(value, int):
        value = value.written(fmt.digits)
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


def parse_answer(fmt: ProblemFormat, text: str, op: str | None = None):
    """Inverse of :func:`answer_text`; given all the model wrote for a problem of ``op`` (None: the format's only
    operator, or one of the lesson's), reads the result at its end, as ``op``'s registered operation reads it
    (raises ValueError on a string that is not an answer)."""
    plain = ordered(fmt, result_text(fmt, text))  # reversing twice restores the order
    operation = OPERATIONS.get(op or fmt.operators[0] if len(fmt.operators) == 1 else op)
    if operation:  # never below 0: signed '+' where the format signs its answers (data/operation.py)
        digits = plain[1:] if fmt.signed and plain[:1] == "+" else plain if not fmt.signed else ""
        if not digits.isdigit():
            raise ValueError(f"not {operation.answer}: {text!r}")
        return operation.read(int(digits), fmt.digits)
    sign = 1
    if fmt.signed:
        sign, plain = (-1 if plain[0] == "-" else 1), plain[1:]
    if not plain.isdigit():
        raise ValueError(f"not an answer: {text!r}")
    return sign * int(plain)
