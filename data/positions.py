"""What each position of a problem string is: the vocabulary that head roles and plot labels speak in."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from data.long_division import LongDivision
from data.problems import ProblemFormat
from data.running_product import RunningProduct, lines_end_on_next
from data.sums import SumFormat
from data.working import layout_of, work_lines


@dataclass(frozen=True)
class Position:
    kind: str  # "bos", "a", "op", "b", "term" (a sum's operand), "=", "work", "then" (a separator in the working),
    # "answer", "quotient" and "remainder" (a division's answer: RESULT_DIGITS), "sign", "eos"
    place: int | None = None  # decimal place of a digit: 0 = units, 1 = tens, ...
    line: int | None = None  # which line of the working (show_work), from 0; a sum's operand: which, from 1

    @property
    def short(self) -> str:
        """A few characters, for plot axes: a2 (a's hundreds), b0, r1 (the result's tens), q1 and R0 (a division's
        quotient and remainder), =, op."""
        if self.kind in ("a", "b", *RESULT_DIGITS):
            return f"{SHORT.get(self.kind, self.kind)}{self.place}"
        if self.kind in ("work", "term"):
            return f"{self.kind[0]}{self.line}.{self.place}"
        return {"bos": "^", "eos": "$", "op": "op", "=": "=", "sign": "±", "then": "|"}[self.kind]

    @property
    def label(self) -> str:
        if self.kind in ("a", "b", *RESULT_DIGITS):
            name = {"answer": "ans", "quotient": "quot", "remainder": "rem"}.get(self.kind, self.kind)
            return f"{name}·10^{self.place}"
        if self.kind in ("work", "term"):
            return f"{'work line' if self.kind == 'work' else 'operand'} {self.line}·10^{self.place}"
        return {"bos": "[BOS]", "eos": "[EOS]", "op": "operator", "=": "=", "sign": "sign", "then": "work '+'/'='"}[
            self.kind
        ]


RESULT_DIGITS = ("answer", "quotient", "remainder")  # the kinds of a result's digits
SHORT = {"answer": "r", "quotient": "q", "remainder": "R"}


def positions(fmt: ProblemFormat | SumFormat) -> list[Position]:
    """The role of every position of ``fmt``'s sequences, [BOS] to [EOS]; a format that only divides writes a
    quotient and a remainder, most significant digit first (with other operators, the layout is theirs)."""
    if isinstance(fmt, SumFormat):
        return sum_positions(fmt)
    operand = lambda kind: [Position(kind, fmt.digits - 1 - i) for i in range(fmt.digits)]  # noqa: E731
    places = list(range(fmt.answer_digits))[:: 1 if fmt.reverse_answer else -1]  # in the order they are written
    answer = [Position("answer", k) for k in places]
    if fmt.operators == "/":  # q then r, or with reverse_answer r then q, units first (data/division.py)
        answer = [Position(part, k) for part in ("quotient", "remainder") for k in range(fmt.digits - 1, -1, -1)]
        answer = answer[::-1] if fmt.reverse_answer else answer
    if fmt.signed:
        answer = answer + [Position("sign")] if fmt.reverse_answer else [Position("sign")] + answer
    work = [
        p for line in range(work_lines(fmt)) for p in [*(Position("work", k, line) for k in places), Position("then")]
    ]
    if hasattr(fmt.working, "positions"):  # a working laid out in steps of its own (data/long_division.py)
        work = fmt.working.positions(fmt, Position)
    return [
        Position("bos"),
        *operand("a"),
        Position("op"),
        *operand("b"),
        Position("="),
        *work,
        *answer,
        Position("eos"),
    ]


def sum_positions(fmt: SumFormat) -> list[Position]:
    """A sum's: each operand and the '+' after it on line j = operand j ('=' after the last), every line of the
    running sum and its '+', then the result (data/sums.py)."""
    digits = range(fmt.answer_digits - 1, -1, -1)  # an operand is written as wide as the result
    places = list(range(fmt.answer_digits))[:: 1 if fmt.reverse_answer else -1]  # in the order they are written
    terms = [
        p for j in range(1, fmt.terms + 1) for p in [*(Position("term", k, j) for k in digits), Position("op", None, j)]
    ]
    work = [p for j in range(1, fmt.terms) for p in [*(Position("work", k, j) for k in places), Position("then")]]
    return [
        Position("bos"),
        *terms[:-1],
        Position("="),
        *work,
        *(Position("answer", k) for k in places),
        Position("eos"),
    ]


def written_in_lines(fmt: ProblemFormat | SumFormat) -> bool:
    """Whether ``fmt`` writes its working in lines that place_of="lined" reads: a running product or a running sum."""
    return isinstance(fmt, SumFormat) or isinstance(fmt.working, RunningProduct)


def written_in_steps(fmt: ProblemFormat | SumFormat) -> bool:
    """Whether ``fmt`` writes long division's steps that place_of="stepped" reads: a format that only divides, with
    show_work and a short divisor (data.b_digits > 0: every step as wide at every length)."""
    working = getattr(fmt, "working", None)
    return isinstance(working, LongDivision) and working.b_digits > 0


ROLES = ("other", "a", "b", "quotient", "remainder")  # place_of="stepped": what a token is; a step's digits follow:
STEP_ROLES = len(ROLES)  # role STEP_ROLES + j is a working step's j-th digit (0: its quotient digit, then the
# remainder's, top first)


def role_ids(fmt: ProblemFormat) -> list[int]:
    """Per position, what the token is (place_of="stepped"): a digit of a or b, of the answer's quotient or
    remainder, or a step's j-th digit (:data:`STEP_ROLES` + j); 0 for every other token."""
    layout, out, column = positions(fmt), [], 0
    for before, p in zip([None, *layout], layout, strict=False):
        same_step = p.kind == "work" and before is not None and (before.kind, before.line) == ("work", p.line)
        column = column + 1 if same_step else 0
        out.append(STEP_ROLES + column if p.kind == "work" else ROLES.index(p.kind) if p.kind in ROLES else 0)
    return out


ANCHORED = ("anchored", "stepped")  # the place_of schemes whose b is anchored: negative places, seen from anywhere
ROLE_STRIDE = 2**20  # place_of="stepped": a token's id is its place + ROLE_STRIDE * its role (|place| < 2**19)


def split_roles(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """place_of="stepped"'s ids -> (roles, places): the place may be negative (b anchored)."""
    roles = torch.div(ids + ROLE_STRIDE // 2, ROLE_STRIDE, rounding_mode="floor")
    return roles, ids - ROLE_STRIDE * roles


def place_ids(fmt: ProblemFormat, place_of: str = "predicted") -> list[int]:
    """Per position, a digit place for the model's place embedding: 1 for units, 2 for tens, ...; 0 for no digit.
    An operand digit gets its own place. place_of="predicted": the token *predicting* an answer digit gets that
    digit's place, so the query that writes the answer's tens and both operands' tens share one id (position
    coupling); "own": every answer digit gets its own place, like the operands' (abacus); "anchored": as
    "predicted", but b's digits are anchored, their places negative (-1 units, -2 tens, ...): seen from every
    column by their own place, as a short multiplier is (model/positions.py); "lined": as "predicted", with b's
    digits placeless, and each id ``place + LINE_STRIDE * line`` (:func:`line_ids`: the working's line a token
    writes, or whose multiplier digit it is); "stepped": as "anchored", each id ``place + ROLE_STRIDE * role``
    (:func:`role_ids`: what the token is)."""
    place = lambda p: 0 if p.place is None else p.place + 1  # noqa: E731
    layout = positions(fmt)
    if place_of == "own":
        return [place(p) for p in layout]
    predicted = [place(p) for p in layout[fmt.prompt_len :]]  # '=' and each answer token predict the next token
    prompt = [-place(p) if place_of in ANCHORED and p.kind == "b" else place(p) for p in layout[: fmt.prompt_len - 1]]
    if place_of == "stepped":
        return [x + ROLE_STRIDE * role for x, role in zip(prompt + predicted + [0], role_ids(fmt), strict=True)]
    if place_of == "lined":
        prompt = [0 if p.kind == "b" else x for p, x in zip(layout, prompt, strict=False)]
        return [x + LINE_STRIDE * line for x, line in zip(prompt + predicted + [0], line_ids(fmt), strict=True)]
    return prompt + predicted + [0]  # [EOS] predicts nothing


LINE_STRIDE = 2**24  # place_of="lined": a token's id is its place + LINE_STRIDE * its line (places stay below it)


def line_ids(fmt: ProblemFormat | SumFormat) -> list[int]:
    """Per position, the line of the working it belongs to, counted from 1, the result the last (a running
    product's, data/running_product.py, or a running sum's, data/sums.py): a token predicting a digit of line i (and
    a line's last digit, which predicts its '+', unless the running product's ``line_end_sees_next`` puts it on line
    i + 1), and b's digit that line i multiplies by (b's top digit: line 1);
    -i for the operand line i adds and its '+' (seen from line i alone: model/positions.py); 0 for every other
    token."""
    layout = positions(fmt)
    line_of = lambda p: -p.line if p.kind in ("term", "op") and p.line else fmt.digits - p.place if p.kind == "b" else 0  # noqa: E731
    ids = [line_of(p) for p in layout[: fmt.prompt_len - 1]]
    sees_next = lines_end_on_next(fmt)
    answer, line = layout[fmt.prompt_len - 1 :], 1
    for p, after in zip(answer[:-1], answer[1:], strict=True):  # '=' and every token after it but [EOS] predict
        line += p.kind == "then"  # a line's '+' predicts the next line's first digit
        ends = sees_next and after.kind in ("then", "eos")  # predicts the line's '+' or [EOS]: whether one follows
        ids.append(line + ends)
    return ids + [0]


def place_tensor(fmt: ProblemFormat, place_of: str, device: torch.device) -> torch.Tensor:
    """:func:`place_ids` as a (seq_len,) int64 tensor on ``device``, made once per layout, scheme and device (a
    training step or a decoding call then copies nothing to a GPU)."""
    return _place_tensor(fmt, layout_of(fmt), place_of, device)


def top_place(fmt: ProblemFormat, place_of: str) -> int:
    """The highest place :func:`place_ids` gives: known on the host, so a training step on a GPU reads it without
    waiting for the GPU (as ``int(places.max())`` would)."""
    return _top_place(fmt, layout_of(fmt), place_of)


@functools.cache  # per layout (data/working.py: layout_of), not per format alone
def _place_tensor(fmt: ProblemFormat, _layout: tuple, place_of: str, device: torch.device) -> torch.Tensor:
    return torch.tensor(place_ids(fmt, place_of), device=device)


@functools.cache
def _top_place(fmt: ProblemFormat, _layout: tuple, place_of: str) -> int:
    return max(place_ids(fmt, place_of))


def shifted(places: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Place ids (T,) and (B,) offsets -> (B, T): every digit's place moved up by its sequence's offset, so a
    model trained on short problems has also seen the places of long ones; 0 (no digit) and anchored places
    (negative) stay."""
    return places + offsets.unsqueeze(1) * (places > 0)


def randomised(places: torch.Tensor, m: int, n_places: int, batch: int) -> torch.Tensor:
    """Place ids (T,) whose digits hold places 1..m -> (batch, T): in each sequence, places 1..m become a sorted
    random draw of m distinct places from 1..n_places (randomised positions, Ruoss et al. 2023); 0 and anchored
    places (negative) stay."""
    draw = torch.rand(batch, n_places, device=places.device).argsort(dim=1)[:, :m].sort(dim=1).values + 1  # (B, m)
    return torch.where(places > 0, draw.gather(1, (places - 1).clamp(min=0).expand(batch, -1)), places)


def training_places(
    seq: torch.Tensor, trained: ProblemFormat, fmt: ProblemFormat, place_of: str, place_offset: int, random_share: float
) -> torch.Tensor | None:
    """The place ids (B, seq_len) of a training batch ``seq`` of ``fmt`` (``trained`` at the batch's width) for a
    model with a place embedding trained on ``trained``: each sequence's places shifted by a random 0..k, where k
    reaches the longest width the model addresses (trained digits + ``place_offset``), so every place up to there
    is learned at every width; ``random_share`` of the sequences get a sorted random draw of places instead
    (:func:`randomised`). None where there is nothing to move: the trained layout's own places are then used."""
    spare = trained.digits + place_offset - fmt.digits  # places above this width's top one
    if fmt == trained and not spare:
        return None
    if place_of in ("lined", "stepped"):  # read by their differences alone (place_vectors=false): nothing to move
        return place_tensor(fmt, place_of, seq.device)
    batch, device = len(seq), seq.device
    places = place_tensor(fmt, place_of, device)  # (seq_len,)
    out = shifted(places, torch.randint(spare + 1, (batch,), device=device))  # (B, seq_len)
    if random_share:  # this share of the sequences: places drawn from all the model has, in order
        pick = torch.rand(batch, 1, device=device) < random_share
        top = top_place(fmt, place_of)  # this width's highest place
        out = torch.where(pick, randomised(places, top, top + spare, batch), out)
    return out


def token_labels(text_tokens: list[str]) -> list[str]:
    """Short axis labels for a sequence's tokens ([BOS] -> '^', [EOS] -> '$')."""
    return [{"[BOS]": "^", "[EOS]": "$"}.get(t, t) for t in text_tokens]
