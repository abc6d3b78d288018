"""Arithmetic strings as data: disjoint splits, seeded, streaming or a fixed training set -- with no trainer
attached (``python analyse.py`` reads a run's test set here); data/datamodule.py hands it to Lightning.

One problem's text and tokens: data/problems.py; drawing the problems of a split: data/sampler.py; the stream of
fresh training batches, and a fixed set's epochs: data/stream.py; hard cases: data/difficulty.py.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from data.checks import check_whole
from data.difficulty import HardCases
from data.problems import ProblemEncoder, ProblemFormat
from data.sampler import ProblemSampler
from data.stream import ACCELERATOR_DRAW_STEPS, FreshBatches
from data.tokenizer import CharTokenizer

SEED_MAX = 2**32 - 1  # the run's seed= range (training/config.py); far larger overflowed torch's int64 in the stream


@dataclass(frozen=True)
class DataConfig:
    """The data's settings (configs/data/, each key a field; each checked here, with its key named).

    digits, operators, reverse_answer, show_work, mixed_lengths, round_numbers, larger_first: the
        :class:`ProblemFormat`.
    mixed_widths: with streaming, every training batch written at a width drawn from 1..digits
        (:class:`FreshBatches`); validation and test stay at ``digits``.
    batch_size: training batch size; ``eval_batch_size`` for validation and test.
    streaming: draw a fresh training batch every step (default) instead of cycling a fixed set of ``n_train``
        problems.
    hard_share, hard_fade_steps: with streaming, the share of each batch drawn as hard cases at step 0, fading
        linearly to none at ``hard_fade_steps`` (:class:`HardCases`); 0 = uniform throughout.
    draw_steps: with streaming, how many steps' batches are drawn at once, on the device that trains
        (:class:`FreshBatches`); null = 1 on the CPU (the stream every recorded CPU figure was measured with) and
        ``ACCELERATOR_DRAW_STEPS`` on a GPU.
    n_val, n_test: sizes of the held-out sets (distinct problems, never seen in training).
    val_fraction, test_fraction: share of the problem space reserved for each held-out split.
    seed: seeds every draw, so the same seed gives the same data.
    """

    digits: int = 3
    operators: str = "+"
    reverse_answer: bool = True
    show_work: bool = False
    mixed_lengths: bool | float = False
    round_numbers: float = 0.0
    larger_first: bool = False
    mixed_widths: bool = False
    batch_size: int = 128
    eval_batch_size: int = 2500
    streaming: bool = True
    n_train: int = 100_000
    hard_share: float = 0.5
    hard_fade_steps: int = 300
    draw_steps: int | None = None
    n_val: int = 2_500
    n_test: int = 10_000
    val_fraction: float = 0.01
    test_fraction: float = 0.02
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batch_size", "eval_batch_size", "n_train", "n_val", "n_test"):
            check_whole(name, getattr(self, name))
        for name in ("streaming", "mixed_widths"):  # the format checks its own
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be true or false")
        if not self.streaming and self.n_train < self.batch_size:  # drop_last would leave not one training batch
            raise ValueError(
                f"n_train={self.n_train}: must be at least batch_size={self.batch_size} when streaming is false"
            )
        HardCases.check(self.hard_share, self.hard_fade_steps, self.streaming)
        FreshBatches.check(self.draw_steps, self.mixed_widths, self.streaming, self.show_work)
        check_whole("seed", self.seed, least=0, hint=" (as the run's seed)", most=SEED_MAX)
        sampler = ProblemSampler(self.fmt, self.val_fraction, self.test_fraction)  # the format's and sampler's checks
        sampler.check_room("val", self.n_val)
        sampler.check_room("test", self.n_test)

    @property
    def fmt(self) -> ProblemFormat:
        """How the problems are written."""
        names = (f.name for f in fields(ProblemFormat))
        return ProblemFormat(**{name: getattr(self, name) for name in names})


class ArithmeticData:
    """Arithmetic problems as token ids, as ``config`` (a :class:`DataConfig`; None: its defaults) says."""

    def __init__(self, config: DataConfig | None = None):
        config = DataConfig() if config is None else config
        self.config, self.fmt = config, config.fmt
        self.sampler = ProblemSampler(self.fmt, config.val_fraction, config.test_fraction)
        self.tokenizer = CharTokenizer()
        self.encoder = ProblemEncoder(self.fmt, self.tokenizer.vocab)
        self.batch_size, self.eval_batch_size = config.batch_size, config.eval_batch_size
        self.streaming, self.n_train, self.draw_steps = config.streaming, config.n_train, config.draw_steps
        self.mixed_widths = config.mixed_widths
        self.sizes = {"val": config.n_val, "test": config.n_test}
        self.seed = config.seed
        self.hard = HardCases(self.sampler, config.hard_share, config.hard_fade_steps) if config.hard_share else None
        self.held_out: dict[str, torch.Tensor] = {}

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def held_out_set(self, split: str) -> torch.Tensor:
        """The (n, seq_len) token ids of the val or test set; the same for a given seed."""
        if split not in self.held_out:
            generator = torch.Generator().manual_seed(self.seed * 1000 + (1 if split == "val" else 2))
            problems = self.sampler.sample(split, self.sizes[split], generator)
            self.held_out[split] = self.encoder.encode(*problems)
        return self.held_out[split]

    def training_stream(
        self, device: torch.device | str = "cpu", start: int = 0, rank: int = 0, world_size: int = 1
    ) -> FreshBatches:
        """The streamed training batches of process ``rank`` on ``device``, from step ``start``; drawn
        ``draw_steps`` at a time (null: 1 on a CPU, ``ACCELERATOR_DRAW_STEPS`` elsewhere)."""
        device = torch.device(device)
        return FreshBatches(
            self.sampler, self.encoder, self.batch_size, self.seed, start, rank, world_size, self.hard, device,
            draw_steps=self.draw_steps or (1 if device.type == "cpu" else ACCELERATOR_DRAW_STEPS),
            mixed_widths=self.mixed_widths,
        )  # fmt: skip
