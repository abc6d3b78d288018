"""Arithmetic strings as data: disjoint splits, seeded, streaming or a fixed training set -- with no trainer
attached (``python analyse.py`` reads a run's test set here); data/datamodule.py hands it to Lightning.

One problem's text and tokens: data/problems.py; drawing the problems of a split: data/sampler.py; the stream of
fresh training batches, and a fixed set's epochs: data/stream.py; hard cases: data/difficulty.py.
"""

from __future__ import annotations

import torch

from data.difficulty import HardCases
from data.problems import ProblemEncoder, ProblemFormat
from data.sampler import ProblemSampler
from data.stream import ACCELERATOR_DRAW_STEPS, FreshBatches
from data.tokenizer import CharTokenizer

SEED_MAX = 2**32 - 1  # the run's seed= range (training/config.py); far larger overflowed torch's int64 in the stream


def _whole_numbers(**values) -> None:
    """ValueError naming the first of ``values`` that is not a whole number >= 1."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r}: must be a whole number >= 1")


class ArithmeticData:
    """Arithmetic problems as token ids.

    Args:
        digits, operators, reverse_answer, show_work, mixed_lengths, round_numbers, larger_first: the
            :class:`ProblemFormat`.
        mixed_widths: with streaming, every training batch written at a width drawn from 1..digits
            (:class:`FreshBatches`); validation and test stay at ``digits``.
        batch_size: training batch size; ``eval_batch_size`` for validation and test.
        streaming: draw a fresh training batch every step (default) instead of cycling a fixed set
            of ``n_train`` problems.
        hard_share, hard_fade_steps: with streaming, the share of each batch drawn as hard cases at step 0,
            fading linearly to none at ``hard_fade_steps`` (:class:`HardCases`); 0 = uniform throughout.
        draw_steps: with streaming, how many steps' batches are drawn at once, on the device that trains
            (:class:`FreshBatches`); null = 1 on the CPU (the stream every recorded CPU figure was measured
            with) and ``ACCELERATOR_DRAW_STEPS`` on a GPU.
        n_val, n_test: sizes of the held-out sets (distinct problems, never seen in training).
        val_fraction, test_fraction: share of the problem space reserved for each held-out split.
        seed: seeds every draw, so the same seed gives the same data.
    """

    def __init__(
        self,
        digits: int = 3,
        operators: str = "+",
        reverse_answer: bool = True,
        show_work: bool = False,
        mixed_lengths: bool | float = False,
        round_numbers: float = 0.0,
        larger_first: bool = False,
        mixed_widths: bool = False,
        batch_size: int = 256,
        eval_batch_size: int = 2500,
        streaming: bool = True,
        n_train: int = 100_000,
        hard_share: float = 0.0,
        hard_fade_steps: int = 0,
        draw_steps: int | None = None,
        n_val: int = 2_500,
        n_test: int = 10_000,
        val_fraction: float = 0.01,
        test_fraction: float = 0.02,
        seed: int = 0,
    ):
        super().__init__()  # the next class's: LightningDataModule's in ArithmeticDataModule
        _whole_numbers(
            batch_size=batch_size, eval_batch_size=eval_batch_size, n_train=n_train, n_val=n_val, n_test=n_test
        )
        for name, value in (("streaming", streaming), ("mixed_widths", mixed_widths)):  # the format checks its own
            if not isinstance(value, bool):
                raise ValueError(f"{name}={value!r}: must be true or false")
        if not streaming and n_train < batch_size:  # drop_last would leave not one training batch
            raise ValueError(f"n_train={n_train}: must be at least batch_size={batch_size} when streaming is false")
        HardCases.check(hard_share, hard_fade_steps, streaming)
        FreshBatches.check(draw_steps, mixed_widths, streaming, show_work)
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= SEED_MAX:
            raise ValueError(f"seed={seed!r}: must be a whole number in [0, {SEED_MAX}] (as the run's seed)")
        self.fmt = ProblemFormat(
            digits, operators, reverse_answer, show_work, mixed_lengths, round_numbers, larger_first
        )
        self.sampler = ProblemSampler(self.fmt, val_fraction, test_fraction)
        self.tokenizer = CharTokenizer()
        self.encoder = ProblemEncoder(self.fmt, self.tokenizer.vocab)
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.streaming, self.n_train, self.draw_steps = streaming, n_train, draw_steps
        self.mixed_widths = mixed_widths
        self.sizes = {"val": n_val, "test": n_test}
        for split, n in self.sizes.items():
            self.sampler.check_room(split, n)
        self.seed = seed
        self.hard = HardCases(self.sampler, hard_share, hard_fade_steps) if hard_share else None
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
