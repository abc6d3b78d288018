"""What each position of a problem string is: the vocabulary that head roles and plot labels speak in."""

from __future__ import annotations

from dataclasses import dataclass

from data.problems import ProblemFormat


@dataclass(frozen=True)
class Position:
    kind: str  # "bos", "a", "op", "b", "=", "answer", "sign", "eos"
    place: int | None = None  # decimal place of a digit: 0 = units, 1 = tens, ...

    @property
    def short(self) -> str:
        """A few characters, for plot axes: a2 (a's hundreds), b0, r1 (the result's tens), =, op."""
        if self.kind in ("a", "b", "answer"):
            return f"{'r' if self.kind == 'answer' else self.kind}{self.place}"
        return {"bos": "^", "eos": "$", "op": "op", "=": "=", "sign": "±"}[self.kind]

    @property
    def label(self) -> str:
        if self.kind in ("a", "b", "answer"):
            name = "ans" if self.kind == "answer" else self.kind
            return f"{name}·10^{self.place}"
        return {"bos": "[BOS]", "eos": "[EOS]", "op": "operator", "=": "=", "sign": "sign"}[self.kind]


def positions(fmt: ProblemFormat) -> list[Position]:
    """The role of every position of ``fmt``'s sequences, [BOS] to [EOS]."""
    operand = lambda kind: [Position(kind, fmt.digits - 1 - i) for i in range(fmt.digits)]  # noqa: E731
    answer = [Position("answer", fmt.answer_digits - 1 - i) for i in range(fmt.answer_digits)]
    if fmt.signed:
        answer = [Position("sign")] + answer
    if fmt.reverse_answer:
        answer = answer[::-1]
    return [Position("bos"), *operand("a"), Position("op"), *operand("b"), Position("="), *answer, Position("eos")]


def place_ids(fmt: ProblemFormat) -> list[int]:
    """Per position, the digit place it reads or predicts, for the model's place embedding: 1 for units, 2 for
    tens, ...; 0 for no digit. An operand digit gets its own place; the token *predicting* an answer digit gets
    that digit's place, so the query that writes the answer's tens and both operands' tens share one id."""
    place = lambda p: 0 if p.place is None else p.place + 1  # noqa: E731
    layout = positions(fmt)
    predicted = [place(p) for p in layout[fmt.prompt_len :]]  # '=' and each answer token predict the next token
    return [place(p) for p in layout[: fmt.prompt_len - 1]] + predicted + [0]  # [EOS] predicts nothing


def token_labels(text_tokens: list[str]) -> list[str]:
    """Short axis labels for a sequence's tokens ([BOS] -> '^', [EOS] -> '$')."""
    return [{"[BOS]": "^", "[EOS]": "$"}.get(t, t) for t in text_tokens]
