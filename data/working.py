"""The working of long multiplication, written before a '*' answer (``ProblemFormat.show_work``).

With ``show_work`` a '*' answer is preceded by the working of long multiplication, one line per step, each
line as wide as the answer and written in the answer's digit order:

    12*34=  0048+0360=  0408        a*b_0, + a*b_1*10, = the product (plain digits shown; spaces added)
    123*456=  000738+006150=006888+049200=  056088    with 3 digits: a running sum between partial products

so every digit the model writes is the sum of two digits above it plus a carry, or one digit of a times
one digit of b plus a carry, whatever the operand size (Deng et al. 2023 write products this way).
'+' and '-' problems in the same format need no working: their lines are zeros.

:class:`Working` holds what a :class:`data.problems.ProblemFormat` knows of it (the format holds one as
``fmt.working``): how many lines, what each holds, their values and their text, and where the result starts.
"""

from __future__ import annotations

import torch


class Working:
    """The working's layout and values for one ProblemFormat (``fmt``: its digits, operators, answer width and
    digit order), which holds it as ``fmt.working``."""

    def __init__(self, fmt):
        self.fmt = fmt

    def check(self) -> None:
        """ValueError for show_work without '*' among the operators."""
        if self.fmt.show_work and "*" not in self.fmt.operators:
            raise ValueError(
                f"show_work=true: only '*' problems have working to show, and operators={self.fmt.operators!r}; "
                "add '*' or set show_work=false"
            )

    @property
    def lines(self) -> int:
        """Lines of working before a '*' result: d partial products and the d - 2 running sums between them."""
        return 2 * self.fmt.digits - 2 if self.fmt.show_work else 0  # show_work implies '*' (check)

    @property
    def length(self) -> int:
        """Tokens of working before the result: each line, then '+' or '=' (0 without ``show_work``)."""
        return self.lines * (self.fmt.answer_digits + 1)

    @staticmethod
    def line(i: int) -> tuple[str, int]:
        """What work line i holds: ("product", j) for q_j = a * b_j * 10^j, ("sum", j) for s_j = q_0 + ... + q_j.
        The lines run q_0, q_1, s_1, q_2, s_2, ..., q_{d-1}; the result s_{d-1} follows them."""
        return ("product", (i + 1) // 2) if i == 0 or i % 2 == 1 else ("sum", i // 2)

    @property
    def separators(self) -> str:
        """The character after each work line: q_0 + q_1 = s_1 + q_2 = s_2 ... + q_{d-1} = (then the result)."""
        adds_next = lambda i: i == 0 or self.line(i)[0] == "sum"  # noqa: E731 (then a product is added)
        return "".join("+" if adds_next(i) else "=" for i in range(self.lines))

    def values(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(N,) problems -> (N, lines) values of the working: for '*' the partial products
        q_j = a * b_j * 10^j (b_j: b's digit j) and the running sums s_j = q_0 + ... + q_j between them, in the
        order q_0, q_1, s_1, q_2, s_2, ..., q_{d-1}; zeros for '+' and '-'."""
        lines = []
        for i in range(self.lines):
            kind, j = self.line(i)
            lines.append(a * ((b // 10**j) % 10) * 10**j if kind == "product" else a * (b % 10 ** (j + 1)))
        if not lines:
            return torch.zeros(len(a), 0, dtype=torch.int64, device=a.device)
        is_product = (self.fmt.operator_codes(op_idx) == 2).unsqueeze(1)
        return torch.where(is_product, torch.stack(lines, dim=1), 0)

    def result_text(self, written: str) -> str:
        """The result at the end of everything the model wrote (the whole text when no working is shown)."""
        return written[-self.fmt.result_len :] if self.length else written

    def text(self, a: int, op: str, b: int) -> str:
        """The working written before the result ('' without ``show_work``)."""
        if not self.length:
            return ""
        fmt = self.fmt
        lines = self.values(torch.tensor([a]), torch.tensor([fmt.operators.index(op)]), torch.tensor([b]))
        return "".join(
            fmt.ordered(f"{int(v):0{fmt.answer_digits}d}") + sep
            for v, sep in zip(lines[0].tolist(), self.separators, strict=True)
        )
