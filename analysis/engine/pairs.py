"""Clean / corrupted problem pairs that isolate one written digit's computation, for patching and circuits.

A pair differs only in the operand digits of ONE place (a_p, b_p or both), chosen so that everything the model
writes before the studied digit is the same in both (teacher-forced, so the prefix is shared) and the studied
digit itself differs. The place changed, relative to the studied digit, names the pair's kind -- for '+' at r_k:

    base add       place k changed: the digit's own sum changes          123+456=9750 vs 133+456=9850   (r1)
    carry          place k-1, its digit sum moved by 10: the carry into r_k flips and r_(k-1) stays
                                                                         127+456=3850 vs 122+451=3750   (r1)
    sum-9 cascade  a lower place: a carry ripples into r_k through a sum of 9

('-': base subtract, borrow, borrow cascade; for '*' every place feeds partial products, so the kind names the
place: "a1/b1".)
The metric is the logit difference at the studied digit: logit[clean digit] - logit[corrupted digit].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from data.division import tokenizer_for
from data.positions import RESULT_DIGITS, Position, positions
from data.problems import ProblemEncoder, ProblemFormat

# what changing a digit j places below the studied one does, per operator (j = 0, 1, 2+)
KINDS = {"+": ("base add", "carry", "sum-9 cascade"), "-": ("base subtract", "borrow", "borrow cascade")}


@dataclass
class Pairs:
    """n pairs studying one written digit; the model reads ``inputs`` and ``corrupted_inputs``."""

    target: str  # the studied digit's short name: "r1" (the result's tens), "w0.2" (working line 0, hundreds)
    query: int  # the input position whose next-token logits predict it
    clean: torch.Tensor  # (n, seq_len) token ids
    corrupted: torch.Tensor  # (n, seq_len): one operand digit differs
    clean_token: torch.Tensor  # (n,) the studied digit's token in the clean problem
    corrupted_token: torch.Tensor  # (n,) ... and in the corrupted one (always different)
    kinds: list[str]  # per pair: its KINDS entry (base add, carry, ...) or the changed place (a1/b1)

    def __len__(self) -> int:
        return len(self.kinds)

    @property
    def inputs(self) -> torch.Tensor:
        """What the model reads of the clean problems: up to the studied digit's query (nothing later can change
        its logits: attention is causal). (n, query + 1)"""
        return self.clean[:, : self.query + 1]

    @property
    def corrupted_inputs(self) -> torch.Tensor:
        return self.corrupted[:, : self.query + 1]

    def to(self, device) -> Pairs:
        tensors = (self.clean, self.corrupted, self.clean_token, self.corrupted_token)
        return Pairs(self.target, self.query, *(t.to(device) for t in tensors), self.kinds)

    def subset(self, kind: str) -> Pairs:
        keep = torch.tensor([k == kind for k in self.kinds], device=self.clean.device)
        tensors = (self.clean, self.corrupted, self.clean_token, self.corrupted_token)
        return Pairs(self.target, self.query, *(t[keep] for t in tensors), [k for k in self.kinds if k == kind])

    def logit_diff(self, logits: torch.Tensor) -> torch.Tensor:
        """Logits (n, T, vocab) of a run on these pairs' inputs -> (n,) logit[clean digit] - logit[corrupted digit]
        at the studied position."""
        return self.digit_logit_diff(logits[:, self.query])

    def digit_logit_diff(self, at: torch.Tensor) -> torch.Tensor:
        """The studied position's logits (n, vocab) -> (n,) logit[clean digit] - logit[corrupted digit]."""
        rows = torch.arange(len(at), device=at.device)
        return at[rows, self.clean_token] - at[rows, self.corrupted_token]


def studied_digits(fmt: ProblemFormat) -> list[int]:
    """Positions of every written digit (working and result; not signs or separators), in writing order."""
    return [i for i, p in enumerate(positions(fmt)) if p.kind in ("work", *RESULT_DIGITS)]


def kind_of(op: str, place: int, studied: Position) -> str:
    """The kind of a pair changing the operand digits at ``place``, studying the digit at ``studied``."""
    if op in KINDS and studied.kind == "answer":
        below = studied.place - place
        return KINDS[op][min(below, 2)] if below >= 0 else "higher place"  # higher: '-' flipping the sign
    return f"a{place}/b{place}"


def contrast_pairs(fmt: ProblemFormat, at: int, n: int = 256, seed: int = 0, tries: int = 64) -> Pairs:
    """Up to ``n`` pairs studying the digit written at position ``at``, the kinds as evenly mixed as they come.

    Candidates are random problems with the digits of one random place redrawn. A candidate is kept when the
    digit at ``at`` changes and everything written before it stays -- or, for a cascade, everything up to the
    changed place's own answer digit (the digits between are the 9s the carry ripples through). None kept
    (an empty Pairs) when no such change exists, e.g. for a result written after working."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + at)
    encoder = ProblemEncoder(fmt, tokenizer_for(fmt).vocab)
    where = positions(fmt)
    m = n * tries
    a, op_idx, b = fmt.random_problems(m, g)
    place = torch.randint(fmt.digits, (m,), generator=g)  # the one place whose digits change
    unit = 10**place
    a2 = a + (torch.randint(10, (m,), generator=g) - a // unit % 10) * unit
    b2 = b + (torch.randint(10, (m,), generator=g) - b // unit % 10) * unit
    clean, corrupted = encoder.encode(a, op_idx, b), encoder.encode(a2, op_idx, b2)

    written = fmt.answer_of(clean != corrupted)  # (m, answer_len): where each pair's answers differ
    first_change = torch.where(written.any(dim=1), written.int().argmax(dim=1), written.shape[1]) + fmt.prompt_len
    kinds = [kind_of(fmt.operators[o], p, where[at]) for o, p in zip(op_idx.tolist(), place.tolist(), strict=True)]
    # where a cascade's changed place writes its own answer digit (it must stay; the 9s after it may not)
    own_digit = {q.place: i for i, q in enumerate(where) if q.kind in RESULT_DIGITS}
    kept_until = torch.tensor(
        [own_digit[p] + 1 if k.endswith("cascade") else at for k, p in zip(kinds, place.tolist(), strict=True)]
    )
    valid = (clean[:, at] != corrupted[:, at]) & (first_change >= torch.minimum(kept_until, torch.tensor(at)))
    index = valid.nonzero().squeeze(1)
    chosen = index[balanced([kinds[i] for i in index.tolist()], n)]
    return Pairs(
        target=where[at].short,
        query=at - 1,
        clean=clean[chosen],
        corrupted=corrupted[chosen],
        clean_token=clean[chosen, at],
        corrupted_token=corrupted[chosen, at],
        kinds=[kinds[i] for i in chosen.tolist()],
    )


def balanced(kinds: list[str], n: int) -> list[int]:
    """Indices of at most n items, taking the kinds in turn so a rare kind is not crowded out."""
    by_kind: dict[str, list[int]] = {}
    for i, kind in enumerate(kinds):
        by_kind.setdefault(kind, []).append(i)
    queues = [iter(v) for v in by_kind.values()]
    chosen: list[int] = []
    while queues and len(chosen) < n:
        for queue in list(queues):
            item = next(queue, None)
            if item is None:
                queues.remove(queue)
            elif len(chosen) < n:
                chosen.append(item)
    return sorted(chosen)
