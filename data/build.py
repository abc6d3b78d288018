"""The data with the research in it: the pieces the lesson's classes are handed, built from the settings that ask for
them -- the working of long multiplication (data/working.py) and varied operands (data/operands.py) for a
:class:`ProblemFormat`, hard cases and mixed widths (data/mixing.py) for the training stream -- each research setting
checked here, with its key named, and whether the held-out splits can hold their sets (:func:`check_room`). The
run's assembly, checkpoints and the analyses build their formats and data here; the lesson's files never import it.

configs/data's ``_target_`` is :func:`data_settings`: every key, the lesson's (:class:`DataConfig`) parted from the
research settings (:class:`ResearchSettings`), all off by default:

- show_work, mixed_lengths, round_numbers, larger_first: the format's (data/working.py, data/operands.py).
- mixed_widths: with streaming, every training batch written at a width drawn from 1..digits (data/mixing.py);
  validation and test stay at ``digits``.
- hard_share, hard_fade_steps: with streaming, the share of each batch drawn as hard cases at step 0, fading
  linearly to none at ``hard_fade_steps`` (data/difficulty.py); 0 = uniform throughout. A fixed training set
  (streaming=false) is drawn once, uniformly, whatever they say.
- b_digits: b drawn with at most this many digits, a at the full width (N x 1, N x 2: data/short_operand.py); 0:
  as many as a. With show_work (k >= 2): the lines a * b_j before the product (data/short_working.py).
- running_product: with show_work, the working of a long b as a running product, b's digits from the top
  (data/running_product.py).
- line_end_sees_next: with running_product, a line's last digit (which predicts its '+' or the [EOS]) sits on the
  next line, where model.place_of=lined shows it b's next digit: whether another line follows.
- operands: 2 is ``a op b``; more is a sum of that many operands, always written with its running sum and drawn as
  data/sums.py's :class:`SumFormat` says (show_work and mixed_lengths are a op b's; operators '+').
- streaming=false: train on a fixed set of ``n_train`` problems, an epoch a pass (data/epochs.py), instead of a
  fresh batch every step.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from data.arithmetic import ArithmeticData, DataConfig
from data.difficulty import HardCases
from data.division import DividingFormat, beyond_lesson, divides, tokenizer_for
from data.epochs import FixedSet
from data.long_division import BesideWorking, LongDivision
from data.mixing import MixedDraws
from data.operands import OperandDraws
from data.operations import LESSON
from data.problems import ProblemEncoder, ProblemFormat
from data.running_product import RunningProduct, lines_end_on_next
from data.sampler import ENUMERATE_LIMIT, ProblemSampler
from data.short_operand import ShortOperand, b_digits
from data.short_working import ShortWorking
from data.sums import SumEncoder, SumFormat, SumSampler
from data.working import Working

if TYPE_CHECKING:
    from data.datamodule import ArithmeticDataModule


def problem_format(*args, **settings) -> ProblemFormat | SumFormat:
    """A :class:`ProblemFormat` from its settings (as ProblemFormat takes them: a checkpoint's ``fmt``, a config's,
    and ``b_digits`` or ``running_product`` where they are set: :func:`format_dict`), with the working and the operand
    draws they ask for; with ``operands`` > 2, a :class:`SumFormat`."""
    names = [f.name for f in fields(ProblemFormat) if f.compare]
    settings.update(zip(names, args, strict=False))
    operands = settings.pop("operands", 2)
    if operands != 2:
        return sum_format(operands, settings)
    short_b = settings.pop("b_digits", 0)  # a short b (data/short_operand.py), saved beside the format's fields
    running = settings.pop("running_product", False)  # the working as a running product (data/running_product.py)
    sees_next = settings.pop("line_end_sees_next", False)  # where its lines end (absent from older checkpoints)
    ShortOperand.check(short_b)
    if not isinstance(running, bool) or (running and (short_b or not settings.get("show_work"))):
        raise ValueError(f"running_product={running!r}: true (with show_work=true and b_digits=0) or false")
    if not isinstance(sees_next, bool) or (sees_next and not running):
        raise ValueError(f"line_end_sees_next={sees_next!r}: true (with running_product=true) or false")
    for name in ("show_work", "larger_first"):
        if not isinstance(settings.get(name, False), bool):
            raise ValueError(f"{name}={settings[name]!r}: must be true or false")
    OperandDraws.shares(settings)
    varied = settings["mixed_lengths"] or settings["round_numbers"] or settings.get("larger_first")
    working = None
    beyond = beyond_lesson(settings.get("operators"))  # '/' or another registered operation: data/division.py's format
    dividing = divides(settings.get("operators"))
    if settings.get("show_work") and dividing and len(settings["operators"]) == 1:  # long division's steps
        working = LongDivision(short_b)
    elif settings.get("show_work"):  # long multiplication's partial products, or the lines of a short b, or Horner's
        working = RunningProduct(sees_next) if running else ShortWorking(short_b) if short_b else Working()
        working = BesideWorking(working, LongDivision(short_b)) if dividing else working  # '/' among others
    draws = OperandDraws() if varied else None
    written = DividingFormat if beyond else ProblemFormat
    fmt = written(**settings, working=working, draws=ShortOperand(short_b, draws) if short_b else draws)
    if working is not None:
        working.check(fmt)
    return fmt


def sum_format(operands, settings: dict) -> SumFormat:
    """The :class:`SumFormat` of ``operands`` operands, refusing the settings a sum does not take."""
    if isinstance(operands, bool) or not isinstance(operands, int) or operands < 2:
        raise ValueError(f"operands={operands!r}: must be a whole number >= 2 (2: a op b; more: a sum of that many)")
    if settings.get("operators", "+") not in ("+", ["+"]):
        raise ValueError(f"operands={operands}: a sum of many operands adds them; set operators='+'")
    others = ("round_numbers", "larger_first", "b_digits", "running_product", "line_end_sees_next")
    others = [name for name in others if settings.get(name)]
    if others:
        raise ValueError(f"operands={operands}: {others[0]} is for a op b problems; leave it unset with operands > 2")
    return SumFormat(settings.get("digits", 10), operands, settings.get("reverse_answer", True))


# its settings
FORMAT_KEYS = (
    *(f.name for f in fields(ProblemFormat) if f.compare),
    *("b_digits", "running_product", "line_end_sees_next", "operands"),
)


def format_dict(fmt: ProblemFormat | SumFormat) -> dict:
    """What :func:`problem_format` rebuilds ``fmt`` from, as a checkpoint and results.json save it: the format's own
    settings, ``b_digits`` where b is drawn short, ``running_product`` where that is the working and
    ``line_end_sees_next`` where its lines end on the next (the working's layout depends on them); a sum's digits,
    operands and digit order."""
    if isinstance(fmt, SumFormat):
        return fmt.to_dict()
    short, running = b_digits(fmt), isinstance(fmt.working, RunningProduct)
    sees_next = lines_end_on_next(fmt)  # saved only where set: older checkpoints load as before
    return (
        fmt.to_dict()
        | ({"b_digits": short} if short else {})
        | ({"running_product": True} if running else {})
        | ({"line_end_sees_next": True} if sees_next else {})
    )


def check_room(sampler: ProblemSampler, split: str, n: int) -> None:
    """ValueError when a held-out split cannot hold its set: in a space too large to list, fewer than twice the
    ``n`` distinct problems asked of it (drawing them would never end: val_fraction=1e-7 at 4 digits holds ~10;
    or ask for 10**300 problems at once); in a listed space, which caps the set at the split's size, none."""
    room = sampler.fractions[split] * sampler.fmt.n_problems
    listed = isinstance(sampler, ProblemSampler) and sampler.fmt.n_problems <= ENUMERATE_LIMIT  # a sum is drawn
    if room < (1 if listed else 2 * n):
        least = "not one problem" if listed else f"fewer than twice n_{split}={n}"
        raise ValueError(
            f"{split}_fraction={sampler.fractions[split]!r}: the {split} split holds about {room:.3g} problems, "
            f"{least}; raise {split}_fraction" + ("" if listed else f" or lower n_{split}")
        )


@dataclass(frozen=True)
class ResearchSettings:
    """The data's research settings (configs/data's keys beside :class:`DataConfig`'s; the module's docstring says
    what each does), checked with the key named as :func:`arithmetic_data` builds their pieces."""

    show_work: bool = False
    operators: str | None = None  # with '/', the run's operators: the lesson's DataConfig is given the rest
    mixed_lengths: bool | float = False
    round_numbers: float = 0.0
    larger_first: bool = False
    mixed_widths: bool = False
    streaming: bool = True
    n_train: int = 100_000
    hard_share: float = 0.0
    hard_fade_steps: int = 0
    b_digits: int = 0
    running_product: bool = False
    line_end_sees_next: bool = False
    operands: int = 2

    @property
    def format_settings(self) -> dict:
        """The :class:`ProblemFormat`'s settings among these: its working and operand draws (b_digits too), and the
        operators where they divide."""
        settings = {name: getattr(self, name) for name in FORMAT_KEYS if hasattr(self, name)}
        return settings if self.operators else {k: v for k, v in settings.items() if k != "operators"}


@dataclass(frozen=True)
class DataSettings:
    """configs/data's settings: the lesson's ``config`` and the ``research`` beside it."""

    config: DataConfig
    research: ResearchSettings

    @property
    def operators(self) -> str:
        """The run's operators: the research settings hold them where they divide (:func:`data_settings`)."""
        return self.research.operators or self.config.operators


def data_settings(**keys) -> DataSettings:
    """configs/data's ``_target_``: its keys parted into the lesson's :class:`DataConfig` and the
    :class:`ResearchSettings` (a key neither has: DataConfig's TypeError, which names it)."""
    research = {f.name: keys.pop(f.name) for f in fields(ResearchSettings) if f.name in keys}
    if beyond_lesson(keys.get("operators")):  # the lesson checks the rest; data/division.py writes '/'
        research["operators"] = "".join(map(str, keys["operators"]))
        keys["operators"] = "".join(c for c in research["operators"] if c in LESSON) or "+"
    return DataSettings(DataConfig(**keys), ResearchSettings(**research))


# its settings by name, for what reads a _target_'s arguments (the config's declared settings: training/settings.py):
# the lesson's, then the research's it lacks ('operators' is both's: the research's where '/' is among them)
_lesson = inspect.signature(DataConfig).parameters
_research = inspect.signature(ResearchSettings).parameters
data_settings.__signature__ = inspect.Signature(
    [*_lesson.values(), *(p for n, p in _research.items() if n not in _lesson)], return_annotation=DataSettings
)


def arithmetic_data(settings: DataSettings | DataConfig | None = None) -> ArithmeticData:
    """The :class:`ArithmeticData` ``settings`` describe (a DataConfig or None: the lesson's alone), its research
    settings checked and given their pieces."""
    if not isinstance(settings, DataSettings):
        settings = DataSettings(DataConfig() if settings is None else settings, ResearchSettings())
    config, research = settings.config, settings.research
    FixedSet.check(research.streaming, research.n_train, config.batch_size)
    HardCases.check(research.hard_share, research.hard_fade_steps)
    one_layout = research.show_work and not (research.b_digits or research.running_product or research.operands > 2)
    MixedDraws.check(research.mixed_widths, research.streaming, one_layout)
    fmt = problem_format(**(config.format_settings | research.format_settings))
    sums = isinstance(fmt, SumFormat)  # a sum of many operands: its own sampler and encoder (data/sums.py)
    if sums and (research.hard_share or not research.streaming):
        raise ValueError(f"operands={fmt.terms}: sums are streamed uniformly; set hard_share=0 and streaming=true")
    sampler = (SumSampler if sums else ProblemSampler)(fmt, config.val_fraction, config.test_fraction)
    check_room(sampler, "val", config.n_val)
    check_room(sampler, "test", config.n_test)
    streamed_hard = research.hard_share and research.streaming  # a fixed set is drawn once, uniformly
    hard = HardCases(sampler, research.hard_share, research.hard_fade_steps) if streamed_hard else None
    mix = MixedDraws(hard, research.mixed_widths) if hard or research.mixed_widths else None
    beyond = isinstance(fmt, DividingFormat)  # built with the lesson's format of its other operators, then handed it
    fixed = None if research.streaming else FixedSet(research.n_train)
    data = ArithmeticData(config, None if beyond else fmt, mix, fixed)
    if sums:  # the lesson's data, handed the pieces that draw and write sums in place of a op b's
        data.sampler, data.encoder = sampler, SumEncoder(fmt, data.tokenizer.vocab)
    elif beyond:  # the lesson's data, handed the format that divides (or does another registered operation), its tokens
        data.fmt, data.tokenizer = fmt, tokenizer_for(fmt)
        data.sampler, data.encoder = sampler, ProblemEncoder(fmt, data.tokenizer.vocab)
    return data


def data_module(settings: DataSettings | DataConfig | None = None) -> ArithmeticDataModule:
    """The LightningDataModule of :func:`arithmetic_data`'s data."""
    from data.datamodule import ArithmeticDataModule  # Lightning: training's alone, so calc.py never imports it

    return ArithmeticDataModule(arithmetic_data(settings))
