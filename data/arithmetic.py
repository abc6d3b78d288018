"""Arithmetic strings as data: disjoint splits, seeded, a stream of fresh training batches -- with no trainer
attached (``python analyse.py`` reads a run's test set here); data/datamodule.py hands it to Lightning. One
problem's layout and tokens: data/problems.py; drawing a split's problems: data/sampler.py; the stream:
data/stream.py; the research's pieces, checked and handed in: data/build.py.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from data.checks import check_whole
from data.problems import ProblemEncoder, ProblemFormat
from data.sampler import ProblemSampler
from data.stream import ACCELERATOR_DRAW_STEPS, FreshBatches
from data.tokenizer import CharTokenizer

SEED_MAX = 2**32 - 1  # the run's seed= range (training/config.py); far larger overflowed torch's int64 in the stream


@dataclass(frozen=True)
class DataConfig:
    """The data's settings (configs/data/, each key a field; each checked with its key named).

    digits, operators, reverse_answer: the :class:`ProblemFormat`.
    batch_size: training batch size; ``eval_batch_size`` for validation and test.
    draw_steps: with streaming, how many steps' batches are drawn at once, on the device that trains
        (:class:`FreshBatches`); null = 1 on the CPU (the stream every recorded CPU figure was measured with) and
        ``ACCELERATOR_DRAW_STEPS`` on a GPU.
    n_val, n_test: sizes of the held-out sets (distinct problems, never seen in training).
    val_fraction, test_fraction: share of the problem space reserved for each held-out split.
    seed: seeds every draw, so the same seed gives the same data.
    The research settings beside these (show_work, hard_share, streaming=false, ...): data/build.py.
    """

    digits: int = 3
    operators: str = "+"
    reverse_answer: bool = True
    batch_size: int = 256
    eval_batch_size: int = 2500
    draw_steps: int | None = None
    n_val: int = 2_500
    n_test: int = 10_000
    val_fraction: float = 0.01
    test_fraction: float = 0.02
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batch_size", "eval_batch_size", "n_val", "n_test"):
            check_whole(name, getattr(self, name))
        if self.draw_steps is not None:
            check_whole("draw_steps", self.draw_steps, hint=", or null (chosen for the device)")
        check_whole("seed", self.seed, least=0, hint=" (as the run's seed)", most=SEED_MAX)
        written = ProblemFormat(**self.format_settings)  # the lesson's settings checked
        ProblemSampler(written, self.val_fraction, self.test_fraction)  # the format's and sampler's checks

    @property
    def format_settings(self) -> dict:
        """The :class:`ProblemFormat`'s settings among these: how the problems are written."""
        return {f.name: getattr(self, f.name) for f in fields(ProblemFormat) if hasattr(self, f.name)}


class ArithmeticData:
    """Arithmetic problems as token ids, as ``config`` (a :class:`DataConfig`; None: its defaults) says. ``fmt``,
    ``mix`` and ``fixed``: the research's pieces, handed in by data/build.py -- the format with its working and
    varied operands, what the training stream mixes in (data/mixing.py), a fixed training set (data/epochs.py);
    None: the lesson's format and its stream of uniform batches."""

    def __init__(self, config: DataConfig | None = None, fmt: ProblemFormat | None = None, mix=None, fixed=None):
        config = DataConfig() if config is None else config
        self.config, self.fmt, self.mix, self.fixed = config, fmt or ProblemFormat(**config.format_settings), mix, fixed
        self.sampler = ProblemSampler(self.fmt, config.val_fraction, config.test_fraction)
        self.tokenizer = CharTokenizer()
        self.encoder = ProblemEncoder(self.fmt, self.tokenizer.vocab)
        self.batch_size, self.eval_batch_size = config.batch_size, config.eval_batch_size
        self.draw_steps = config.draw_steps
        self.sizes = {"val": config.n_val, "test": config.n_test}
        self.seed = config.seed
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
            self.sampler, self.encoder, self.batch_size, self.seed, start, rank, world_size, device,
            draw_steps=self.draw_steps or (1 if device.type == "cpu" else ACCELERATOR_DRAW_STEPS), mix=self.mix,
        )  # fmt: skip
