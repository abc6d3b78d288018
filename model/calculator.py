"""A trained transformer used as a calculator: answer problems, and score it on many at once.

The model's layout (zero padding, reversed answer, sign) lives in :class:`ProblemFormat`; problems are
encoded by :class:`ProblemEncoder` (checked token for token against ``data/text.py: prompt_text`` +
``CharTokenizer.encode`` in tests/test_data.py) and answered by greedy decoding with the KV cache
(:meth:`Transformer.generate`), in batches.

Devices: the net runs where :meth:`Calculator.to` puts it (the CPU by default); problems are encoded on the
CPU (cheap, and :class:`ProblemEncoder`'s lookup tables live there), only the prompts travel to the net, and
answers come back on the CPU, so reading and scoring never see another device.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from data.difficulty import difficulty, long_difficulty
from data.expressions import Problem
from data.positions import place_tensor
from data.problems import ProblemEncoder, ProblemFormat
from data.sums import SumFormat, SumProblem, sum_text
from data.text import (
    allow_digits,
    answer_text,
    as_json,
    encode_problems,
    parse_answer,
    prompt_text,
    result_text,
    written_text,
)
from data.tokenizer import CharTokenizer
from model.device import resolve_device
from model.transformer import Transformer
from storage.messages import counted


@dataclass(frozen=True)
class Answer:
    """What the model wrote: ``text`` in its own layout, ``value`` when that text is a well-formed answer."""

    text: str
    value: int | None

    def __str__(self) -> str:
        return str(self.value) if self.value is not None else f"? (unreadable answer {self.text!r})"


class TrainedModel(Protocol):
    """What reading a trained model needs (the analyses, the evaluator): its network, the format it was trained
    on, and where it computes -- a :class:`Calculator`, or training's ``CalculatorModule`` at the end of a run."""

    net: Transformer
    fmt: ProblemFormat

    @property
    def device(self) -> torch.device: ...


ANY_LENGTH = 10_000  # digits: the longest operands a model with no table of places is asked (it has no limit of its
# own; a 10,000-digit sum is ~30,000 tokens, read into the cache in chunks whose scores stay within SCORES_BUDGET)
SCORES_BUDGET = 2**28  # bytes of attention scores a decoding batch may hold: long problems go in smaller batches


def longest_digits(net, fmt) -> int:
    """The most digits calc.py asks ``net`` (trained on ``fmt``) to take in an operand: as far as the model's places
    (the trained width + place_offset) and its absolute positions (block_size) reach; for a model with no such table,
    :data:`ANY_LENGTH`. Beyond the trained width the answers are the model's guesses at lengths it never trained on
    (``trained_digits``)."""
    cfg, scheme = net.cfg, net.cfg.places
    if not net.has_table:
        return max(fmt.digits, ANY_LENGTH)
    width, places = fmt.digits, fmt.digits + scheme.place_offset if scheme and scheme.place_embedding else None
    while width != places and fmt.at_width(width + 1).seq_len - 1 <= cfg.block_size:
        width += 1
    return width


class Calculator:
    """A :class:`Transformer`, the :class:`ProblemFormat` it was trained on and its tokenizer."""

    def __init__(
        self,
        net: Transformer,
        fmt: ProblemFormat,
        tokenizer: CharTokenizer,
        path: Path | None = None,
        batch_size: int = 1024,
    ):
        self.net, self.fmt, self.tokenizer, self.path = net.eval(), fmt, tokenizer, path
        self.batch_size = batch_size  # 1024 decodes fastest on a CPU core (larger batches fall out of cache)
        self.encoder = ProblemEncoder(fmt, tokenizer.vocab)
        allow_digits(2 * self.longest + 1)  # the longest operands it reads, and their product

    def __repr__(self) -> str:
        return f"Calculator({self.describe()}, device={self.device})"

    # ---- device -----------------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """Where the net computes (its parameters' device)."""
        return next(self.net.parameters()).device

    def to(self, device: str | torch.device) -> Calculator:
        """Move the net to ``device`` ('cpu', 'cuda', 'cuda:1', 'mps', 'auto' or a torch.device; checked by
        :func:`resolve_device`, so a missing one is a :class:`DeviceError`) and return self. The encoder's lookup
        tables stay on the CPU, where problems are encoded: :meth:`generate` moves the prompts."""
        self.net.to(resolve_device(device))
        return self

    # ---- widths -----------------------------------------------------------------------------------------
    @functools.cached_property
    def longest(self) -> int:
        """The most digits an operand may have (:func:`longest_digits`)."""
        return longest_digits(self.net, self.fmt)

    @property
    def trained_digits(self) -> int:
        """The longest operands of the training problems."""
        return self.fmt.digits

    def width_of(self, problem: Problem | SumProblem) -> int:
        """The width ``problem`` is written at: the trained one, or its longer operand's digit count."""
        return max(self.fmt.digits, problem.digits)

    def layout_for(self, problem: Problem | SumProblem) -> ProblemFormat | SumFormat:
        """The format ``problem`` is written in: the trained one at its width; a sum's, shaped for its operands."""
        return (
            problem.layout(self.fmt) if isinstance(problem, SumProblem) else self.fmt.at_width(self.width_of(problem))
        )

    def places(self, fmt: ProblemFormat) -> torch.Tensor | None:
        """The place ids (seq_len,) of ``fmt``'s layout on the net's device; None for the trained layout."""
        scheme = self.net.cfg.places
        if fmt == self.fmt or scheme is None or not scheme.place_embedding:
            return None
        return place_tensor(fmt, scheme.place_of, self.device)

    def describe(self) -> str:
        """e.g. '3-digit + problems, reversed answers, 2 layers x 4 heads'."""
        cfg, fmt = self.net.cfg, self.fmt
        order = "reversed" if fmt.reverse_answer else "plain"
        order = "quotient and remainder" if fmt.operators == "/" else order  # written most significant digit first
        layout = f"{order} answers{' with working' if fmt.work_len else ''}"
        task = f"{fmt.digits}-digit {' '.join(fmt.operators)} problems"
        if isinstance(fmt, SumFormat):
            task = f"sums of {fmt.terms} operands of up to {fmt.digits} digits"
        return f"{task}, {layout}, {counted(cfg.n_layers, 'layer')} x {counted(cfg.n_heads, 'head')}"

    # ---- problems -> tokens -> answers ---------------------------------------------------------------
    def encode(self, problems: list[Problem], fmt: ProblemFormat | None = None) -> torch.Tensor:
        """(N, seq_len) token ids: prompt followed by the true answer and [EOS], in ``fmt`` (the trained one by
        default); beyond what int64 holds, written as text problem by problem."""
        fmt = fmt or self.fmt
        if isinstance(fmt, SumFormat):  # a sum's layout depends on its operands: written as text
            texts = [sum_text(fmt, p.operands) for p in problems]
        elif fmt == self.fmt:
            return encode_problems(self.encoder, problems)
        else:
            texts = [prompt_text(fmt, p.a, p.op, p.b) + written_text(fmt, p.a, p.op, p.b) for p in problems]
        ids = [self.tokenizer.encode(text, bos=True, eos=True) for text in texts]
        return torch.tensor(ids, dtype=torch.int64).reshape(len(problems), fmt.seq_len)

    @torch.inference_mode()
    def generate(self, prompts: torch.Tensor, use_cache: bool = True, fmt: ProblemFormat | None = None) -> torch.Tensor:
        """(N, prompt_len) prompts of ``fmt`` (the trained format by default) on any device -> the greedy answer
        tokens (N, answer_len) on the CPU, batch by batch on the net's device."""
        fmt = fmt or self.fmt
        n_new, places = fmt.answer_len, self.places(fmt)
        if len(prompts) == 0:
            return torch.zeros(0, n_new, dtype=torch.int64)
        prompts = prompts.to(self.device)  # one copy in; the batches' answers stay there until the one copy out
        rows, chunk = self.batching(fmt)
        return torch.cat(
            [
                self.net.generate(prompts[i : i + rows], n_new, use_cache=use_cache, places=places, chunk=chunk)
                for i in range(0, len(prompts), rows)
            ]
        ).cpu()

    def batching(self, fmt: ProblemFormat) -> tuple[int, int]:
        """How problems of ``fmt`` are decoded: rows at once (``batch_size``, fewer for long problems, whose keys and
        values fill the cache) and the prompt's chunk (its attention scores, a float per layer, head, query and
        key, within :data:`SCORES_BUDGET`)."""
        cfg, T = self.net.cfg, fmt.seq_len
        rows = max(1, min(self.batch_size, SCORES_BUDGET // (4 * T * 2 * cfg.n_layers * cfg.d_model)))
        return rows, max(1, SCORES_BUDGET // (4 * rows * T * cfg.n_layers * cfg.n_heads))

    def read(self, ids: list[int], fmt: ProblemFormat | None = None, op: str | None = None) -> Answer:
        """Answer tokens of a problem of ``op`` (None: the format's only one) -> :class:`Answer`; special tokens are
        kept in the text, so a stray [EOS] shows. The value is the result at the end of the text (after any
        working), when it is in the exact layout."""
        fmt = fmt or self.fmt
        text = "".join(self.tokenizer.id_to_token[i] for i in ids)
        try:
            value = parse_answer(fmt, text, op)
        except (ValueError, IndexError):
            return Answer(text, None)
        exact = answer_text(fmt, value) == result_text(fmt, text) and len(text) == fmt.answer_len
        return Answer(text, value if exact else None)  # exact layout only

    def by_layout(self, problems: list[Problem | SumProblem]) -> dict[ProblemFormat | SumFormat, list[int]]:
        """The indices of ``problems`` grouped by the format each is written in (:meth:`layout_for`)."""
        groups: dict[ProblemFormat | SumFormat, list[int]] = {}
        for i, p in enumerate(problems):
            groups.setdefault(self.layout_for(p), []).append(i)
        return groups

    def answer(self, problems: list[Problem | SumProblem]) -> list[Answer]:
        """Each problem answered in its layout (:meth:`layout_for`), the problems of one layout in batches."""
        answers: list[Answer | None] = [None] * len(problems)
        for fmt, indices in self.by_layout(problems).items():
            prompts = fmt.prompt_of(self.encode([problems[i] for i in indices], fmt))
            for i, row in zip(indices, self.generate(prompts, fmt=fmt).tolist(), strict=True):
                answers[i] = self.read(row, fmt, problems[i].op)
        return answers

    # ---- scoring ----------------------------------------------------------------------------------------
    def difficulties(self, problems: list[Problem]) -> list[int]:
        """Per problem, its carries, borrows or long-multiplication carries (:func:`data.difficulty.difficulty`):
        on int64 tensors where every operand fits, else problem by problem (:func:`long_difficulty`)."""
        if any(isinstance(p, SumProblem) for p in problems):
            return [p.carries() for p in problems]
        if all(max(p.a, p.b) < 10**18 for p in problems):
            a = torch.tensor([p.a for p in problems], dtype=torch.int64)
            b = torch.tensor([p.b for p in problems], dtype=torch.int64)
            op_idx = torch.tensor([self.fmt.operators.index(p.op) for p in problems], dtype=torch.int64)
            return difficulty(self.fmt, a, op_idx, b).tolist()
        return [long_difficulty(p.op, p.a, p.b) for p in problems]

    def evaluate(self, problems: list[Problem], lines: list[int] | None = None, show_mistakes: int = 10) -> dict:
        """Exact match and digit accuracy, overall and split by operator, operand length and carries (borrows for
        '-', the carries of long multiplication for '*': :func:`data.difficulty.difficulty`).

        Digit accuracy is the share of answer tokens right (padding zeros, sign and any working included), as in
        training. ``lines`` (the problems' line numbers) labels the mistakes listed.
        """
        n = len(problems)
        exact, digit = torch.zeros(n, dtype=torch.bool), torch.zeros(n)  # per problem
        written: dict[int, tuple[list[int], ProblemFormat]] = {}  # a wrong problem's answer tokens, in its layout
        for fmt, indices in self.by_layout(problems).items():  # each in its own layout
            at = torch.tensor(indices)
            seqs = self.encode([problems[i] for i in indices], fmt)  # (n_w, seq_len)
            predicted = self.generate(fmt.prompt_of(seqs), fmt=fmt)  # (n_w, answer_len)
            exact[at], right = fmt.judge(predicted, seqs)
            digit[at] = right.float().mean(dim=1)
            rows = zip(indices, predicted.tolist(), exact[at].tolist(), strict=True)
            written |= {i: (row, fmt) for i, row, ok in rows if not ok}

        ops = [p.op for p in problems]
        splits = {
            "by_operator": ops,
            "by_operand_digits": [str(p.digits) for p in problems],
            "by_carries": [str(c) for c in self.difficulties(problems)],
        }

        def summary(mask: torch.Tensor) -> dict:
            k = int(mask.sum())
            return {
                "n": k,
                "right": int(exact[mask].sum()),
                "exact_match": float(exact[mask].float().mean()) if k else None,
                "digit_accuracy": float(digit[mask].mean()) if k else None,
            }

        overall = summary(torch.ones(n, dtype=torch.bool))
        report = {"n_problems": overall.pop("n"), **overall}
        for name, keys in splits.items():
            order = sorted(set(keys), key=lambda k: (len(k), k))  # '+' '-' '*', then 1 < 2 < 10
            report[name] = {key: summary(torch.tensor([k == key for k in keys], dtype=torch.bool)) for key in order}
        wrong = (~exact).nonzero().squeeze(1).tolist()
        report["n_mistakes"] = len(wrong)
        report["mistakes"] = []
        for i in wrong[:show_mistakes]:
            answer = self.read(*written[i], problems[i].op)
            report["mistakes"].append(
                {
                    "line": None if lines is None else lines[i],
                    "problem": problems[i].text,
                    "model": as_json(answer.value),  # None: not a number in the model's layout (see model_text)
                    "model_text": answer.text,  # as the model wrote it (padded, reversed, signed)
                    "truth": as_json(problems[i].truth),
                }
            )
        return report
