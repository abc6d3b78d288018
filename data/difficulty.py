"""What makes a problem hard, vectorised over (N,) int64 tensors: carries, borrows, the carries of long
multiplication and the steps of long division. ``calc.py --eval`` splits its scores by these; hard-case sampling
(:class:`HardCases`, experiment=add10's recipe) draws by them.

``columns``: how many digit columns to walk. A caller that knows it (hard-case sampling: the format's digits)
passes it, and nothing reads a value back from the tensors -- no host sync on a GPU; None walks the longest
operand's columns, found with one read.
"""

from __future__ import annotations

import torch

from data.checks import check_whole
from data.operation import columns_of
from data.operations import OPERATIONS
from data.problems import ProblemFormat
from data.sampler import ProblemSampler

HARD_TRIES = 8  # a hard case is the most difficult of this many training draws


def carries(a: torch.Tensor, b: torch.Tensor, columns: int | None = None) -> torch.Tensor:
    """How many columns of the written addition a + b carry a 1 into the next."""
    count, carry = torch.zeros_like(a), torch.zeros_like(a)
    for _ in range(columns_of(torch.maximum(a, b), columns)):
        carry = (a % 10 + b % 10 + carry >= 10).long()
        count += carry
        a, b = a // 10, b // 10
    return count


def borrows(a: torch.Tensor, b: torch.Tensor, columns: int | None = None) -> torch.Tensor:
    """How many columns borrow in the written subtraction larger - smaller (|a - b| is computed that way)."""
    x, y = torch.maximum(a, b), torch.minimum(a, b)
    count, borrow = torch.zeros_like(a), torch.zeros_like(a)
    for _ in range(columns_of(x, columns)):
        borrow = (x % 10 - y % 10 - borrow < 0).long()
        count += borrow
        x, y = x // 10, y // 10
    return count


def product_carries(a: torch.Tensor, b: torch.Tensor, columns: int | None = None) -> torch.Tensor:
    """How many columns of long multiplication a * b carry into the next: column k adds every a_i * b_j with
    i + j = k, plus the carry from column k - 1, writes the last digit and carries the rest."""
    width = max(columns_of(torch.maximum(a, b), columns), 1)
    powers = 10 ** torch.arange(width, dtype=torch.int64, device=a.device)
    a_digits, b_digits = (a.unsqueeze(1) // powers) % 10, (b.unsqueeze(1) // powers) % 10  # (N, width), units first
    partial = a_digits.unsqueeze(2) * b_digits.unsqueeze(1)  # (N, width, width): a_i * b_j
    place = torch.arange(width, device=a.device)
    place = (place.unsqueeze(1) + place).flatten().expand(len(a), -1)  # (N, width * width): i + j
    column_sums = torch.zeros(len(a), 2 * width - 1, dtype=a.dtype, device=a.device)
    column_sums.scatter_add_(1, place, partial.flatten(1))  # (N, 2 * width - 1): column k's sum of a_i * b_j
    count, carry = torch.zeros_like(a), torch.zeros_like(a)
    for k in range(2 * width - 1):
        carry = (column_sums[:, k] + carry) // 10
        count += (carry > 0).long()
    return count


RULES = {"+": carries, "-": borrows, "*": product_carries}  # the lesson's; data/operations.py's hold their own


def rule_of(op: str, hard: bool = False):
    """What counts the difficulty of ``op``'s problems: the lesson's RULES, or the registered operation's steps
    (``hard``: what hard-case sampling draws by, where it has a rule of its own)."""
    if op in RULES:
        return RULES[op]
    operation = OPERATIONS[op]
    return (operation.hard_steps if hard else None) or operation.steps


def difficulty(
    fmt: ProblemFormat,
    a: torch.Tensor,
    op_idx: torch.Tensor,
    b: torch.Tensor,
    columns: int | None = None,
    hard: bool = False,
) -> torch.Tensor:
    """Per problem: the carries ('+'), borrows ('-'), long-multiplication carries ('*') or long-division steps
    ('/': data/quotient.py's rules) it needs, or (``hard``) what hard-case sampling draws by: :func:`rule_of`;
    op_idx indexes ``fmt.operators``.
    Each of the format's rules scores every problem, and each problem keeps its own operator's score (no boolean
    indexing: its size would be read back from a GPU)."""
    count = torch.zeros_like(a)
    for i, op in enumerate(fmt.operators):
        count = torch.where(op_idx == i, rule_of(op, hard)(a, b, columns), count)
    return count


def long_difficulty(op: str, a: int, b: int) -> int:
    """:func:`difficulty` of one problem of any length (Python integers, beyond what int64 holds), column by column
    as :func:`carries` and :func:`borrows` walk them (tests/test_length.py checks that they agree); '*' within
    int64 (no model multiplies longer numbers)."""
    if op == "*":
        return int(product_carries(torch.tensor([a]), torch.tensor([b]))[0])
    if op in OPERATIONS:
        long_steps = OPERATIONS[op].long_steps
        return long_steps(a, b) if long_steps else int(OPERATIONS[op].steps(torch.tensor([a]), torch.tensor([b]))[0])
    x, y = (max(a, b), min(a, b)) if op == "-" else (a, b)
    count = handed = 0  # handed: the carry (or borrow) into the next column
    while x or y:
        column = x % 10 + y % 10 + handed if op == "+" else x % 10 - y % 10 - handed
        handed = int(column >= 10) if op == "+" else int(column < 0)
        count, x, y = count + handed, x // 10, y // 10
    return count


class HardCases:
    """Hard-case sampling that fades: at step 0 a share ``share`` of every training batch is drawn hard --
    each the problem with the most carries, borrows, multiplication carries or tight division steps of ``HARD_TRIES``
    draws -- and that share falls linearly to 0 at ``fade_steps``, after which batches are uniform again."""

    def __init__(self, sampler: ProblemSampler, share: float, fade_steps: int):
        self.sampler, self.share, self.fade_steps = sampler, share, fade_steps

    @staticmethod
    def check(share: float, fade_steps: int) -> None:
        """ValueError unless the datamodule's hard_share and hard_fade_steps can be drawn."""
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
            raise ValueError(f"hard_share={share!r}: must be a number in [0, 1] (0 = uniform batches)")
        check_whole("hard_fade_steps", fade_steps, least=0)
        if share and not fade_steps:
            raise ValueError(
                f"hard_share={share}: hard cases fade out over the first hard_fade_steps steps; "
                "set hard_fade_steps > 0, or hard_share=0"
            )

    def count(self, n: int, step: int) -> int:
        """How many of a batch of n are hard at this step."""
        return round(n * self.share * max(0.0, 1.0 - step / self.fade_steps)) if self.fade_steps else 0

    def sample(
        self, n: int, generator: torch.Generator, sampler: ProblemSampler | None = None
    ) -> tuple[torch.Tensor, ...]:
        """n hard cases; ``sampler``: one of another width (default the trained one's)."""
        sampler = sampler or self.sampler
        a, op_idx, b = sampler.sample("train", n * HARD_TRIES, generator)
        score = difficulty(sampler.fmt, a, op_idx, b, sampler.fmt.digits, hard=True).view(n, HARD_TRIES).float()
        score += torch.rand(n, HARD_TRIES, generator=generator, device=generator.device)  # ties broken at random
        pick = score.argmax(dim=1) + torch.arange(n, device=generator.device) * HARD_TRIES
        return a[pick], op_idx[pick], b[pick]
