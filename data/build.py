"""The data with the research in it: the pieces the lesson's classes are handed, built from the settings that ask for
them -- the working of long multiplication (data/working.py) and varied operands (data/operands.py) for a
:class:`ProblemFormat`, hard cases and mixed widths (data/mixing.py) for the training stream -- each research setting
checked here, with its key named. The run's assembly, checkpoints and the analyses build their formats and data
here; the lesson's files never import it.

The research settings (configs/data's keys, fields of :class:`DataConfig`), all off by default:

- show_work, mixed_lengths, round_numbers, larger_first: the format's (data/working.py, data/operands.py).
- mixed_widths: with streaming, every training batch written at a width drawn from 1..digits (data/mixing.py);
  validation and test stay at ``digits``.
- hard_share, hard_fade_steps: with streaming, the share of each batch drawn as hard cases at step 0, fading
  linearly to none at ``hard_fade_steps`` (data/difficulty.py); 0 = uniform throughout.
- streaming=false: train on a fixed set of ``n_train`` problems, an epoch a pass (data/epochs.py), instead of a
  fresh batch every step.
"""

from __future__ import annotations

from dataclasses import fields

from data.arithmetic import ArithmeticData, DataConfig
from data.datamodule import ArithmeticDataModule
from data.difficulty import HardCases
from data.epochs import FixedSet
from data.mixing import MixedDraws
from data.operands import OperandDraws
from data.problems import ProblemFormat
from data.sampler import ProblemSampler
from data.working import Working


def problem_format(*args, **settings) -> ProblemFormat:
    """A :class:`ProblemFormat` from its settings (as ProblemFormat takes them: a checkpoint's ``fmt``, a config's),
    with the working and the operand draws they ask for."""
    names = [f.name for f in fields(ProblemFormat) if f.compare]
    settings.update(zip(names, args, strict=False))
    for name in ("show_work", "larger_first"):
        if not isinstance(settings.get(name, False), bool):
            raise ValueError(f"{name}={settings[name]!r}: must be true or false")
    OperandDraws.shares(settings)
    varied = settings["mixed_lengths"] or settings["round_numbers"] or settings.get("larger_first")
    pieces = {"working": Working() if settings.get("show_work") else None, "draws": OperandDraws() if varied else None}
    fmt = ProblemFormat(**settings, **pieces)
    Working.check(fmt)
    return fmt


def arithmetic_data(config: DataConfig | None = None) -> ArithmeticData:
    """The :class:`ArithmeticData` ``config`` describes, its research settings checked and given their pieces."""
    config = DataConfig() if config is None else config
    FixedSet.check(config.streaming, config.n_train, config.batch_size)
    HardCases.check(config.hard_share, config.hard_fade_steps, config.streaming)
    MixedDraws.check(config.mixed_widths, config.streaming, config.show_work)
    fmt = problem_format(**config.format_settings)
    sampler = ProblemSampler(fmt, config.val_fraction, config.test_fraction)
    hard = HardCases(sampler, config.hard_share, config.hard_fade_steps) if config.hard_share else None
    mix = MixedDraws(hard, config.mixed_widths) if hard or config.mixed_widths else None
    return ArithmeticData(config, fmt, mix, None if config.streaming else FixedSet(config.n_train))


def data_module(config: DataConfig | None = None) -> ArithmeticDataModule:
    """The LightningDataModule of :func:`arithmetic_data`'s data."""
    return ArithmeticDataModule(arithmetic_data(config))
