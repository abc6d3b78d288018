"""LightningDataModule for arithmetic strings: disjoint splits, seeded, streaming or fixed training set."""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from data.difficulty import difficulty
from data.problems import ProblemEncoder, ProblemFormat, ProblemSampler, mix
from data.tokenizer import CharTokenizer

HARD_TRIES = 8  # a hard case is the most difficult of this many training draws
ACCELERATOR_DRAW_STEPS = 64  # on a GPU, training batches are drawn this many steps at a time (FreshBatches)


class HardCases:
    """Hard-case sampling that fades: at step 0 a share ``share`` of every training batch is drawn hard --
    each the problem with the most carries, borrows or multiplication carries of ``HARD_TRIES`` draws --
    and that share falls linearly to 0 at ``fade_steps``, after which batches are uniform again."""

    def __init__(self, sampler: ProblemSampler, share: float, fade_steps: int):
        self.sampler, self.share, self.fade_steps = sampler, share, fade_steps

    def count(self, n: int, step: int) -> int:
        """How many of a batch of n are hard at this step."""
        return round(n * self.share * max(0.0, 1.0 - step / self.fade_steps)) if self.fade_steps else 0

    def sample(
        self, n: int, generator: torch.Generator, sampler: ProblemSampler | None = None
    ) -> tuple[torch.Tensor, ...]:
        """n hard cases; ``sampler``: one of another width (default the trained one's)."""
        sampler = sampler or self.sampler
        a, op_idx, b = sampler.sample("train", n * HARD_TRIES, generator)
        score = difficulty(sampler.fmt, a, op_idx, b, sampler.fmt.digits).view(n, HARD_TRIES).float()
        score += torch.rand(n, HARD_TRIES, generator=generator, device=generator.device)  # ties broken at random
        pick = score.argmax(dim=1) + torch.arange(n, device=generator.device) * HARD_TRIES
        return a[pick], op_idx[pick], b[pick]


class FreshBatches(IterableDataset):
    """An endless stream of freshly drawn training batches, (batch_size, seq_len) token ids each.

    Batch ``i`` is a pure function of (seed, i, draw_steps): the stream can restart at any step (resuming needs
    only the step, whatever the loader prefetched), and with ``world_size`` processes every step draws one
    global batch of ``batch_size * world_size`` problems of which process ``rank`` takes its slice -- so
    data-parallel training sees exactly the problems a single process with the global batch would.
    ``hard`` mixes hard cases into early batches (:class:`HardCases`).

    The batches are drawn on ``device``, ``draw_steps`` steps' worth at a time: on a GPU one draw of many
    batches costs the kernel launches (and the one host sync of picking training problems) of a single
    batch, so a step only slices what is already there. ``draw_steps=1`` draws each batch on its own.

    ``mixed_widths``: each draw is written at a width drawn uniformly from 1..digits (its operands at most that
    long), so sequences of every length are trained on; its problems' splits are the same hash as at full width.
    """

    def __init__(
        self,
        sampler: ProblemSampler,
        encoder: ProblemEncoder,
        batch_size: int,
        seed: int,
        start: int = 0,
        rank: int = 0,
        world_size: int = 1,
        hard: HardCases | None = None,
        device: torch.device | str = "cpu",
        draw_steps: int = 1,
        mixed_widths: bool = False,
    ):
        self.sampler, self.encoder, self.batch_size, self.seed = sampler, encoder, batch_size, seed
        self.start, self.rank, self.world_size, self.hard = start, rank, world_size, hard
        self.device, self.draw_steps, self.mixed_widths = torch.device(device), draw_steps, mixed_widths
        self.widths: dict[int, tuple[ProblemSampler, ProblemEncoder]] = {}

    def at_width(self, digits: int) -> tuple[ProblemSampler, ProblemEncoder]:
        """The sampler and encoder of problems written ``digits`` wide."""
        if digits == self.sampler.fmt.digits:
            return self.sampler, self.encoder
        if digits not in self.widths:
            fmt = self.sampler.fmt.at_width(digits)
            sampler = ProblemSampler(fmt, self.sampler.fractions["val"], self.sampler.fractions["test"])
            self.widths[digits] = sampler, ProblemEncoder(fmt, self.encoder.vocab)
        return self.widths[digits]

    def draw(self, index: int) -> torch.Tensor:
        """(draw_steps, batch_size, seq_len): this process's batches of steps index * draw_steps onwards."""
        # hash (seed, index) first: generators seeded with neighbouring numbers start out alike
        key = mix(torch.tensor([self.seed * 1_000_003 + index]))
        generator = torch.Generator(self.device).manual_seed(int(key) & (2**63 - 1))
        n, steps = self.batch_size * self.world_size, range(index * self.draw_steps, (index + 1) * self.draw_steps)
        sampler, encoder = self.sampler, self.encoder
        if self.mixed_widths:
            top = self.sampler.fmt.digits
            width = torch.randint(1, top + 1, (1,), generator=generator, device=self.device)
            sampler, encoder = self.at_width(int(width))  # one host sync per draw on a GPU
        n_hard = [self.hard.count(n, step) if self.hard else 0 for step in steps]  # per step, known on the host
        problems = sampler.sample("train", n * len(steps) - sum(n_hard), generator)
        if sum(n_hard):  # each step's hard cases shuffled into its uniform ones, so every slice gets its share
            hard = self.hard.sample(sum(n_hard), generator, sampler)
            orders = [torch.randperm(n, generator=generator, device=self.device) for _ in steps]

            def shuffled_in(uniform: torch.Tensor, hard: torch.Tensor) -> torch.Tensor:  # one column: a, op or b
                pieces = zip(uniform.split([n - k for k in n_hard]), hard.split(n_hard), orders, strict=True)
                return torch.cat([torch.cat([u, h])[order] for u, h, order in pieces])

            problems = tuple(map(shuffled_in, problems, hard))
        batches = encoder.encode(*problems).view(len(steps), n, -1)  # (draw_steps, global batch, seq_len)
        return batches[:, self.rank * self.batch_size : (self.rank + 1) * self.batch_size]

    def __iter__(self):
        index, skip = divmod(self.start, self.draw_steps)
        while True:
            yield from self.draw(index)[skip:]
            index, skip = index + 1, 0


class ArithmeticDataModule(L.LightningDataModule):
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
        super().__init__()
        for name, value in (
            ("batch_size", batch_size),
            ("eval_batch_size", eval_batch_size),
            ("n_train", n_train),
            ("n_val", n_val),
            ("n_test", n_test),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r}: must be a whole number >= 1")
        for name, value in (("streaming", streaming), ("mixed_widths", mixed_widths)):  # the format checks its own
            if not isinstance(value, bool):
                raise ValueError(f"{name}={value!r}: must be true or false")
        if mixed_widths and (show_work or not streaming):
            raise ValueError(
                "mixed_widths=true: needs streaming=true and show_work=false (batches of every width are drawn "
                "as they are trained on, and working has one layout per width)"
            )
        if not streaming and n_train < batch_size:  # drop_last would leave not one training batch
            raise ValueError(f"n_train={n_train}: must be at least batch_size={batch_size} when streaming is false")
        if isinstance(hard_share, bool) or not isinstance(hard_share, (int, float)) or not 0 <= hard_share <= 1:
            raise ValueError(f"hard_share={hard_share!r}: must be a number in [0, 1] (0 = uniform batches)")
        if not isinstance(hard_fade_steps, int) or isinstance(hard_fade_steps, bool) or hard_fade_steps < 0:
            raise ValueError(f"hard_fade_steps={hard_fade_steps!r}: must be a whole number >= 0")
        if hard_share and not (streaming and hard_fade_steps):
            raise ValueError(
                f"hard_share={hard_share}: hard cases are drawn into the stream over the first hard_fade_steps "
                "steps; set streaming=true and hard_fade_steps > 0, or hard_share=0"
            )
        if draw_steps is not None and (
            not isinstance(draw_steps, int) or isinstance(draw_steps, bool) or draw_steps < 1
        ):
            raise ValueError(f"draw_steps={draw_steps!r}: must be a whole number >= 1, or null (chosen for the device)")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"seed={seed!r}: must be a whole number")
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

    def train_dataloader(self):
        trainer = self.trainer  # None outside a Trainer (e.g. in tests): one process on the CPU, from the start
        rank, world = (trainer.global_rank, trainer.world_size) if trainer else (0, 1)
        if self.streaming:
            start = trainer.global_step if trainer else 0  # a resumed run picks up the stream where it stopped
            device = trainer.strategy.root_device if trainer else "cpu"
            return DataLoader(self.training_stream(device, start, rank, world), batch_size=None)
        generator = torch.Generator().manual_seed(self.seed)
        fixed = self.encoder.encode(*self.sampler.sample("train", self.n_train, generator))
        return DataLoader(
            fixed[rank::world], batch_size=self.batch_size, shuffle=True, drop_last=True, generator=generator
        )

    def _eval_loader(self, split: str) -> DataLoader:
        return DataLoader(self.held_out_set(split), batch_size=self.eval_batch_size)

    def val_dataloader(self):
        return self._eval_loader("val")

    def test_dataloader(self):
        return self._eval_loader("test")
