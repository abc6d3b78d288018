"""Problems as people write them (``7+45``, ``7 + 45 =``, ``7+45=52``), parsed for one model's format.

The model's own layout (zero padding, reversed answer, sign) stays inside :class:`ProblemFormat`; this
module only reads what a user typed and says clearly what is wrong with it:

    >>> parse_expression(" 7+45 ", ProblemFormat(3, "+"))
    Problem(a=7, op='+', b=45, given=None)

Accepted: ``a op b``, optionally followed by ``=``; whole numbers written with ASCII digits, at most as many
digits as the model was trained on; ``op`` one of the model's operators; spaces around the operator and
``=`` are fine. ``a op b = answer`` only where an answer is expected (``allow_answer=True``), and the
answer must be the right one (it is a label, checked against the arithmetic); a division's is ``q r R``
(``17/5 = 3 r 2``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from data.operations import OPERATIONS, symbols
from data.problems import ProblemFormat
from data.quotient import Quotient
from data.short_operand import b_digits
from data.short_working import b_limit
from data.sums import MOST_OPERANDS, SumFormat, SumProblem
from data.text import allow_digits, evaluate

_DIGIT = "0123456789"
_SUM = re.compile(r"[0-9]+(\s*\+\s*[0-9]+)+")  # a sum of many operands (a model with data.operands > 2)
_INTEGER = re.compile(r"-?[0-9]+")
_QUOTIENT = re.compile(r"([0-9]+)\s*r\s*([0-9]+)")  # a division's answer: 3 r 2
_TIMES_X = re.compile(r"[0-9]\s*[xX]\s*[0-9]")  # 3x4, 3 X 4
_HINTS = {  # characters people type for our operators, or for operations we do not have (an operator's: none)
    "×": "write '*' for multiplication",
    "·": "write '*' for multiplication",
    "−": "write the ASCII '-'",
    "–": "write the ASCII '-'",
    "＋": "write the ASCII '+'",
    "÷": "write '/' for division",
    ":": "write '/' for division",
    "%": "'%' is not supported",
    "^": "powers are not supported",
    ".": "only whole numbers",
    ",": "only whole numbers, without thousands separators",
    "(": "no parentheses: one operation per line",
    ")": "no parentheses: one operation per line",
}


class ExpressionError(ValueError):
    """An input that is not a problem this model can be asked; the message says what is accepted."""


@dataclass(frozen=True)
class Problem:
    a: int
    op: str
    b: int
    given: int | Quotient | None = None  # the answer written after '=', when the input carried one

    @property
    def text(self) -> str:
        return f"{self.a}{self.op}{self.b}"

    @property
    def truth(self) -> int | Quotient:
        return evaluate(self.a, self.op, self.b)

    @property
    def digits(self) -> int:
        """Digits of the longer operand (0 counts as one): the width the problem needs."""
        return len(str(max(self.a, self.b)))


def accepted(fmt: ProblemFormat, longest: int | None = None) -> str:
    """What this model can be asked, e.g. 'a+b with whole numbers 0-999 (e.g. 7+45)'; ``longest``: the most digits
    a model that reads places beyond its trained width can address (the trained width by default)."""
    if isinstance(fmt, SumFormat):
        most = max(longest or 0, fmt.digits)
        numbers = f"2 to {MOST_OPERANDS:,} whole numbers of up to {most:,} digits"
        return f"accepted: a+b+c+... with {numbers} (trained on {fmt.terms} of up to {fmt.digits}; e.g. 12+345+6789)"
    ops = fmt.operators
    shape = f"a{ops}b" if len(ops) == 1 else f"a op b (op one of {' '.join(ops)})"
    a, b = 7, 45 if fmt.digits > 1 else 5
    if (fmt.larger_first and ops[0] == "-") or ops[0] == "/":
        a, b = b, a  # the order the model was trained on; a division by a short number
    example = f"{a}{ops[0]}{b}"
    if longest and longest > fmt.digits:
        numbers = f"whole numbers of up to {longest} digits (trained on up to {fmt.digits})"
    else:
        numbers = f"whole numbers 0-{10**fmt.digits - 1}"
    if b_limit(fmt) or ("/" in ops and b_digits(fmt)):
        numbers += f", b of at most {b_limit(fmt) or b_digits(fmt)} digits"
    return f"accepted: {shape} with {numbers} (e.g. {example})"


def _character_problem(text: str) -> str | None:
    """The first character no expression may hold, explained; None when every character is allowed."""
    for ch in text:
        if ch in _DIGIT or ch in symbols() or ch == "=" or ch.isspace():
            continue
        if ch.isdigit():
            return f"{ch!r} is not an ASCII digit (write numbers with 0-9)"
        hint = _HINTS.get(ch) or ("write '*' for multiplication" if ch in "xX" and _TIMES_X.search(text) else None)
        if hint:
            return f"unexpected {ch!r}: {hint}"
        if ch.isalpha():
            return f"unexpected letter {ch!r}"
        return f"unexpected character {ch!r}"
    return None


def _shape_problem(lhs: str) -> str:
    """Why ``lhs`` is not ``a op b`` (called only once it is known not to be)."""
    compact = re.sub(r"\s+", "", lhs)
    if not any(c in symbols() for c in compact):
        return "no operator between the numbers" if re.search(r"[0-9]\s+[0-9]", lhs) else "no operator"
    if compact[0] == "-" and compact[1:2].isdigit():
        return "negative numbers are not supported"
    if compact[0] in symbols():
        return f"missing number before {compact[0]!r}"
    if compact[-1] in symbols():
        return f"missing number after {compact[-1]!r}"
    run = re.search(rf"[{re.escape(symbols())}]{{2,}}", compact)
    if run:
        if len(run.group()) == 2 and run.group()[1] == "-":
            return "negative numbers are not supported"
        return f"operators in a row ({run.group()!r})"
    if sum(c in symbols() for c in compact) > 1:
        return "one operation per line (no chains like 1+2+3; a model trained with data.operands > 2 adds them)"
    return "a space inside a number"


def _number(digits: str, fmt: ProblemFormat, longest: int | None) -> int:
    significant = digits.lstrip("0") or "0"
    limit = max(longest or 0, fmt.digits)
    if len(significant) > limit:  # checked before int(), whose cost grows as digits squared
        shown = significant if len(significant) <= 20 else significant[:8] + "..."
        reach = f"can address at most {limit}" if limit > fmt.digits else f"was trained on at most {fmt.digits}"
        raise ExpressionError(f"{shown} has {len(significant)} digits; this model {reach}; {accepted(fmt, longest)}")
    allow_digits(limit * 2 + 1)  # Python's own limit (4,300 digits) below what this model addresses: lifted
    return int(significant)


def parse_expression(
    text: str, fmt: ProblemFormat | SumFormat, allow_answer: bool = False, longest: int | None = None
) -> Problem | SumProblem:
    """``text`` -> :class:`Problem` (a :class:`SumProblem` for a model of sums), or :class:`ExpressionError` saying
    what is wrong and what is accepted.

    allow_answer: accept ``a op b = answer`` (the answer must be right); otherwise only ``a op b`` or ``a op b =``.
    longest: the most digits an operand may have (``Calculator.longest``); the trained width by default.
    """
    s = text.strip()
    fail = lambda why: ExpressionError(f"{why}; {accepted(fmt, longest)}")  # noqa: E731
    if not s:
        raise fail("empty expression")
    head, _, tail = s.partition("=")
    bad = _character_problem(head) or _character_problem(tail.replace("r", "") if "/" in head else tail)
    if bad:
        raise fail(bad)
    if s.count("=") > 1:
        raise fail("more than one '='")
    lhs, _, rhs = (part.strip() for part in s.partition("="))
    if not lhs:
        raise fail("nothing before '='")
    if isinstance(fmt, SumFormat):
        return _parse_sum(lhs, rhs, fmt, allow_answer, longest)
    match = re.fullmatch(rf"([0-9]+)\s*([{re.escape(symbols())}])\s*([0-9]+)", lhs)  # a op b
    if not match:
        raise fail(_shape_problem(lhs))
    a_text, op, b_text = match.groups()
    if op not in fmt.operators:
        known = " ".join(repr(o) for o in fmt.operators)
        raise fail(f"this model was not trained on {op!r} (only on {known})")
    a, b = _number(a_text, fmt, longest), _number(b_text, fmt, longest)
    if op in OPERATIONS and OPERATIONS[op].nonzero_b and b == 0:
        raise fail(f"{OPERATIONS[op].name} by zero: b must be a whole number of at least 1")
    if op == "/" and b_digits(fmt) and b >= 10 ** b_digits(fmt):  # trained on short divisors (data/short_operand.py)
        raise fail(f"{b} has {len(str(b))} digits; this model divides by numbers of at most {b_digits(fmt)}")
    if b_limit(fmt) and b >= 10 ** b_limit(fmt):  # the working has a line per digit of b (data/short_working.py)
        raise fail(f"{b} has {len(str(b))} digits; this model multiplies by numbers of at most {b_limit(fmt)}")
    given = None
    if rhs:
        if not allow_answer:
            raise fail(f"an answer after '=' ({rhs!r}) is only accepted when checking answers; ask with {a}{op}{b}")
        truth = evaluate(a, op, b)
        pair = isinstance(truth, Quotient)  # a division's answer is q r R
        written = _QUOTIENT.fullmatch(rhs) if pair else _INTEGER.fullmatch(rhs)
        if not written or len(rhs) > 2 * max(longest or 0, fmt.digits, 20) + 3:
            shape = "a quotient and remainder (q r R, e.g. 3 r 2)" if pair else "a whole number"
            raise fail(f"the answer after '=' must be {shape}, got {rhs!r}")
        given = Quotient(*map(int, written.groups())) if pair else int(rhs)
        if given != truth:
            raise ExpressionError(f"the given answer {given} is wrong: {a}{op}{b} = {truth}")
    return Problem(a, op, b, given)


def _parse_sum(lhs: str, rhs: str, fmt: SumFormat, allow_answer: bool, longest: int | None) -> SumProblem:
    """``lhs`` (= ``rhs``) as a :class:`SumProblem`, for a model trained on sums of many operands."""
    fail = lambda why: ExpressionError(f"{why}; {accepted(fmt, longest)}")  # noqa: E731
    if not _SUM.fullmatch(lhs):
        compact = re.sub(r"\s+", "", lhs)
        wrong = next((op for op in symbols() if op != "+" and op in compact), None)
        raise fail(f"this model was not trained on {wrong!r} (only on '+')" if wrong else _shape_problem(lhs))
    terms = lhs.split("+")
    if len(terms) > MOST_OPERANDS:
        raise fail(f"{len(terms):,} operands; at most {MOST_OPERANDS:,}")
    problem = SumProblem(tuple(_number(t.strip(), fmt, longest) for t in terms))
    if rhs:
        if not allow_answer:
            raise fail(f"an answer after '=' ({rhs!r}) is only accepted when checking answers; ask with {problem.text}")
        if not rhs.isdigit() or len(rhs) > max(longest or 0, fmt.digits, 20) + len(str(MOST_OPERANDS)):
            raise fail(f"the answer after '=' must be a whole number, got {rhs!r}")
        if int(rhs) != problem.truth:
            raise ExpressionError(f"the given answer {int(rhs)} is wrong: {problem.text} = {problem.truth}")
        problem = SumProblem(problem.operands, int(rhs))
    return problem


@dataclass
class ProblemFile:
    """The problems of a file (with their 1-based line numbers) and the lines that were not problems."""

    problems: list[Problem]
    lines: list[int]
    invalid: list[tuple[int, str, str]]  # (line number, text, error)


def read_problems(lines: Iterable[str], fmt: ProblemFormat, longest: int | None = None) -> ProblemFile:
    """Lines ``expr`` or ``expr=answer``; blank lines and ``#`` comments are skipped; ``longest`` as in
    :func:`parse_expression`."""
    out = ProblemFile([], [], [])
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            out.problems.append(parse_expression(text, fmt, allow_answer=True, longest=longest))
            out.lines.append(number)
        except ExpressionError as e:
            out.invalid.append((number, text, str(e)))
    return out
