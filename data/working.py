"""The working of long multiplication, written before a '*' answer (``ProblemFormat.show_work``).

With ``show_work`` a '*' answer is preceded by the working of long multiplication, one line per step, each
line as wide as the answer and written in the answer's digit order:

    12*34=  0048+0360=  0408        a*b_0, + a*b_1*10, = the product (plain digits shown; spaces added)
    123*456=  000738+006150=006888+049200=  056088    with 3 digits: a running sum between partial products

so every digit the model writes is the sum of two digits above it plus a carry, or one digit of a times
one digit of b plus a carry, whatever the operand size (Deng et al. 2023 write products this way).
'+' and '-' problems in the same format need no working: their lines are zeros.

:class:`Working` is the piece a :class:`data.problems.ProblemFormat` is handed as ``fmt.working`` (data/build.py;
None without ``show_work``; data/short_working.py's with a short b): how many lines, what each holds, their values,
tokens and text, and where the result starts. It holds nothing of its own: each method reads the format it is given
(its digits, operators, answer width and digit order), so a format at another width keeps the same piece.
"""

from __future__ import annotations

import dataclasses

import torch

from data.problems import digits_of, lookup
from data.text import ordered


def work_lines(fmt) -> int:
    """Lines of working before a '*' result of ``fmt``: 0 without ``show_work``."""
    return 0 if fmt.working is None else fmt.working.lines(fmt)


class Working:
    """The working's layout and values, for the ProblemFormat each method is given (``fmt``)."""

    @staticmethod
    def check(fmt) -> None:
        """ValueError for show_work without '*' among the operators."""
        if fmt.show_work and "*" not in fmt.operators:
            raise ValueError(
                f"show_work=true: only '*' problems (or a format that only divides, operators='/') have working to "
                f"show, and operators={fmt.operators!r}; add '*' or set show_work=false"
            )

    @staticmethod
    def lines(fmt) -> int:
        """Lines of working before a '*' result: d partial products and the d - 2 running sums between them."""
        return 2 * fmt.digits - 2

    def length(self, fmt) -> int:
        return work_length(self, fmt)

    @staticmethod
    def line(i: int) -> tuple[str, int]:
        """What work line i holds: ("product", j) for q_j = a * b_j * 10^j, ("sum", j) for s_j = q_0 + ... + q_j.
        The lines run q_0, q_1, s_1, q_2, s_2, ..., q_{d-1}; the result s_{d-1} follows them."""
        return ("product", (i + 1) // 2) if i == 0 or i % 2 == 1 else ("sum", i // 2)

    def separators(self, fmt) -> str:
        """The character after each work line: q_0 + q_1 = s_1 + q_2 = s_2 ... + q_{d-1} = (then the result)."""
        adds_next = lambda i: i == 0 or self.line(i)[0] == "sum"  # noqa: E731 (then a product is added)
        return "".join("+" if adds_next(i) else "=" for i in range(self.lines(fmt)))

    def values(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(N,) problems -> (N, lines) values of the working: for '*' the partial products
        q_j = a * b_j * 10^j (b_j: b's digit j) and the running sums s_j = q_0 + ... + q_j between them, in the
        order q_0, q_1, s_1, q_2, s_2, ..., q_{d-1}; zeros for '+' and '-'."""
        lines = []
        for i in range(self.lines(fmt)):
            kind, j = self.line(i)
            lines.append(a * ((b // 10**j) % 10) * 10**j if kind == "product" else a * (b % 10 ** (j + 1)))
        if not lines:
            return torch.zeros(len(a), 0, dtype=torch.int64, device=a.device)
        is_product = (fmt.operator_codes(op_idx) == 2).unsqueeze(1)
        return torch.where(is_product, torch.stack(lines, dim=1), 0)

    def tokens(self, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor, vocab: dict) -> torch.Tensor:
        return work_tokens(self, fmt, a, op_idx, b, vocab)

    def result_text(self, fmt, written: str) -> str:
        return result_after(self, fmt, written)

    def text(self, fmt, a: int, op: str, b: int) -> str:
        """The working written before the result ('' with no lines)."""
        if not self.length(fmt):
            return ""
        lines = self.values(fmt, torch.tensor([a]), torch.tensor([fmt.operators.index(op)]), torch.tensor([b]))
        return work_text(self, fmt, lines[0].tolist())


# ---- what every working piece writes the same way, from its lines, values and separators (Working's, and
# data/short_working.py's) ---------------------------------------------------------------------------------
def work_length(piece, fmt) -> int:
    """Tokens of working before the result: each line, then its separator."""
    return piece.lines(fmt) * (fmt.answer_digits + 1)


def work_tokens(piece, fmt, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor, vocab: dict) -> torch.Tensor:
    """(N,) problems -> (N, length) token ids of ``piece``'s working: each line's digits (in the answer's order),
    then its separator."""
    digit = lookup(tuple(vocab[str(d)] for d in range(10)), a.device)  # (10,): digit -> its token id
    work = digit[digits_of(piece.values(fmt, a, op_idx, b), fmt.answer_digits)]  # (N, lines, answer_digits)
    if fmt.reverse_answer:
        work = work.flip(2)
    separators = lookup(tuple(vocab[c] for c in piece.separators(fmt)), a.device)  # (lines,)
    separators = separators.expand(len(a), -1).unsqueeze(2)  # (N, lines, 1)
    return torch.cat([work, separators], dim=2).flatten(1)


def work_text(piece, fmt, values: list[int]) -> str:
    """``piece``'s lines of these values (Python ints: any width) as text: each as wide as the answer, in its digit
    order, then its separator."""
    lines = (ordered(fmt, f"{v:0{fmt.answer_digits}d}") for v in values)
    return "".join(line + sep for line, sep in zip(lines, piece.separators(fmt), strict=True))


def layout_of(fmt) -> tuple:
    """What tells apart formats whose settings are equal: their working's kind and lines, and a working piece's own
    settings where it has them (a frozen dataclass, compared by value: data/running_product.py's) -- ProblemFormat's
    equality and hash do not see its working piece; the key of every cache of a layout."""
    piece = fmt.working if dataclasses.is_dataclass(fmt.working) else type(fmt.working)
    return piece, work_lines(fmt)


def result_after(piece, fmt, written: str) -> str:
    """The result at the end of everything the model wrote (the whole text when no working is shown)."""
    return written[-fmt.result_len :] if piece.length(fmt) else written
