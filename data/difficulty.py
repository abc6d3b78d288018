"""What makes a problem hard, vectorised over (N,) int64 tensors: operand length, carries, borrows and the
carries of long multiplication. ``calc.py --eval`` splits its scores by these; hard-case sampling draws by them."""

from __future__ import annotations

import torch

from data.problems import ProblemFormat


def operand_digits(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Digits of the longer operand (0 counts as one digit)."""
    rest = torch.maximum(a, b) // 10
    digits = torch.ones_like(rest)
    while bool((rest > 0).any()):
        digits += (rest > 0).long()
        rest = rest // 10
    return digits


def carries(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many columns of the written addition a + b carry a 1 into the next."""
    count, carry = torch.zeros_like(a), torch.zeros_like(a)
    while bool((a > 0).any() or (b > 0).any()):
        carry = (a % 10 + b % 10 + carry >= 10).long()
        count += carry
        a, b = a // 10, b // 10
    return count


def borrows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many columns borrow in the written subtraction larger - smaller (|a - b| is computed that way)."""
    x, y = torch.maximum(a, b), torch.minimum(a, b)
    count, borrow = torch.zeros_like(a), torch.zeros_like(a)
    while bool((x > 0).any()):
        borrow = (x % 10 - y % 10 - borrow < 0).long()
        count += borrow
        x, y = x // 10, y // 10
    return count


def product_carries(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many columns of long multiplication a * b carry into the next: column k adds every a_i * b_j with
    i + j = k, plus the carry from column k - 1, writes the last digit and carries the rest."""
    width = int(operand_digits(a, b).max()) if len(a) else 1
    powers = 10 ** torch.arange(width, dtype=torch.int64, device=a.device)
    a_digits, b_digits = (a.unsqueeze(1) // powers) % 10, (b.unsqueeze(1) // powers) % 10  # (N, width), units first
    partial = a_digits.unsqueeze(2) * b_digits.unsqueeze(1)  # (N, width, width): a_i * b_j
    place = torch.arange(width, device=a.device)
    place = place.unsqueeze(1) + place  # i + j
    count, carry = torch.zeros_like(a), torch.zeros_like(a)
    for k in range(2 * width - 1):
        carry = (partial[:, place == k].sum(dim=1) + carry) // 10
        count += (carry > 0).long()
    return count


def difficulty(fmt: ProblemFormat, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per problem: the carries ('+'), borrows ('-') or long-multiplication carries ('*') it needs;
    op_idx indexes ``fmt.operators``."""
    code = fmt.operator_codes(op_idx)  # 0 '+', 1 '-', 2 '*'
    count = torch.zeros_like(a)
    for c, rule in enumerate((carries, borrows, product_carries)):
        mine = code == c
        if bool(mine.any()):
            count[mine] = rule(a[mine], b[mine])
    return count
