"""Every setting a run takes, declared once: its type in an OmegaConf structured config, its range or choices beside it.

Two kinds of node. The settings of our own objects (model, data, optim, analysis, our callbacks) are their arguments:
:func:`schema_of` reads each ``_target_``'s signature, so a key it does not take, or one value where it takes a list
(``analysis.probes=5``), is refused by OmegaConf before the object is built; the object checks its values itself, in
its own words and range (``data.digits=0: must be a whole number >= 1``). The settings of Lightning's objects that the
project configures -- the Trainer, early stopping, the progress bar, the csv logger -- and the run's own top-level
keys are declared below, each with its type and, where a type is not enough, a :class:`Rule`; any other setting of
theirs is one the project does not support (each training batch is a function of (seed, step), a run is as long as
trainer.max_steps).

The check runs on the composed config, not as a schema in Hydra's defaults list: ``+key=value`` adds past a schema
there (Hydra opens the node for it), and a resumed run's config.yaml is composed first, then checked the same way.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from training.limits import machine_cores

NOT_VALUES = ("_target_", "default_root_dir", "save_dir", "run_dir")  # code, and where files go (training/cli.py)


def did_you_mean(word: str, options, prefix: str = "") -> str:
    """ " (did you mean PREFIX<nearest option>?)", or "" when none is near ``word``."""
    close = difflib.get_close_matches(word, [str(o) for o in options if str(o) != word], n=1, cutoff=0.6)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""


def as_written(value) -> str:
    """A value as the command line writes it: true, false, null."""
    return "true" if value is True else "false" if value is False else "null" if value is None else str(value)


@dataclass(frozen=True)
class Rule:
    """What a type does not say of a setting: its bounds or the values it may take; ``why``: where a bound is from."""

    low: float | None = None
    high: float | None = None
    choices: tuple | None = None
    why: str = ""

    def accepts(self, value) -> bool:
        if self.choices is not None:
            return value in self.choices and type(value) in {type(c) for c in self.choices}  # true is not 1
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


def rule(default, low=None, high=None, choices=None, why: str = ""):
    """A dataclass field with its :class:`Rule`."""
    return field(default=default, metadata={"rule": Rule(low, high, choices, why)})


def allowed(hint, found: Rule | None) -> str:
    """What a setting takes, in the command line's words: "a whole number >= 1", "one of max, min", "a list of text"."""
    kinds = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    nullable = type(None) in kinds
    kind = next((k for k in kinds if k is not type(None)), Any)
    if found is not None and found.choices is not None:
        text = "one of " + ", ".join(map(as_written, found.choices)) if found.choices else ""
    else:
        text = _words(kind)
        if found is not None and found.low is not None:
            text += f" in [{found.low}, {found.high}]" if found.high is not None else f" >= {found.low}"
    text += "" if not nullable else ", or null" if text else "null"
    return text + (f" ({found.why})" if found and found.why else "")


def _words(kind) -> str:
    """A type as the command line writes it: list[str] -> "a list of text"."""
    if typing.get_origin(kind) in (list, tuple) or kind in (list, tuple):
        inner = [a for a in typing.get_args(kind) if a is not Ellipsis]
        return "a list" + (f" of {_words(inner[0]).removeprefix('a ').removeprefix('an ')}" if inner else "")
    names = {str: "text", int: "a whole number", float: "a number", bool: "true or false"}
    return names.get(kind, "a value")


PRECISIONS = ("32-true", 32, "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", 64)  # precision=32 is an int
YES_NO = (True, False)
TRAIN_LESS = "set trainer.max_steps instead"  # Lightning's ways to train less, which would finish "ok" untrained


@dataclass
class RunSettings:
    """configs/train.yaml's own keys; the groups are checked node by node (:data:`LIGHTNING`, :func:`schema_of`)."""

    seed: int = rule(0, 0, 2**32 - 1)  # the range Lightning's seed_everything accepts
    # more threads than cores never makes a step faster (they take turns on the same cores); far more crash
    # (threads=100000 segfaulted inside OpenMP), so the bound is the cores this process may use
    threads: int | None = rule(None, 1, machine_cores(), why=f"this machine has {machine_cores()} cores")
    compile: str | None = None  # torch.compile's own mode names: training/compiling.py checks them
    matmul_precision: str = rule("high", choices=("highest", "high", "medium"))
    target_accuracy: float | None = rule(0.9999, 0, 1)
    target_loss: float | None = rule(0.01, 0)
    verbose: bool = False
    resume: str | None = None  # a run directory or a .ckpt: storage/rundir.py's resume_target checks it
    model: Any = None
    data: Any = None
    optim: Any = None
    trainer: Any = None
    logger: Any = None
    callbacks: Any = None
    analysis: Any = None


@dataclass
class TrainerSettings:
    """The Trainer's settings the project supports (configs/trainer)."""

    _target_: str = "lightning.pytorch.Trainer"
    accelerator: str = rule("cpu", choices=("cpu", "gpu", "cuda", "mps", "auto"))
    devices: Any = 1  # a whole number or auto: training/config.py's check
    precision: Any = rule("32-true", choices=PRECISIONS)
    max_steps: int = rule(1800, 1)
    val_check_interval: int = rule(50, 1)
    log_every_n_steps: int = rule(20, 1)
    gradient_clip_val: float | None = rule(1.0, 0)
    max_epochs: int | None = rule(None, choices=(-1,), why=TRAIN_LESS)
    limit_train_batches: float | None = rule(None, choices=(1.0,), why=TRAIN_LESS)
    fast_dev_run: bool = rule(False, choices=(False,), why="for a short run set trainer.max_steps")
    check_val_every_n_epoch: int | None = rule(None, choices=(), why="the training stream has no epochs")
    num_sanity_val_steps: int = rule(0, 0)
    enable_model_summary: bool = False
    enable_progress_bar: bool = True
    deterministic: Any = rule(None, choices=(*YES_NO, "warn", None))
    benchmark: bool | None = None
    # several processes: trainer=ddp (Lightning starts them on this machine); several machines: a launcher's
    strategy: str = rule("auto", choices=("auto", "ddp"))
    num_nodes: int = rule(1, 1)
    default_root_dir: str | None = None


@dataclass
class EarlyStoppingSettings:
    """callbacks.early_stopping: Lightning's EarlyStopping settings the project supports, and TargetStop's own."""

    _target_: str = "training.callbacks.TargetStop"
    monitor: str = rule("val/exact_match", choices=("val/exact_match", "val/loss", "val/digit_accuracy"))
    mode: str = rule("max", choices=("max", "min"))
    patience: int = rule(1000000, 0, why="validations without improvement")
    stopping_threshold: float | None = None
    loss_below: float | None = rule(None, 0)


@dataclass
class ProgressBarSettings:
    """callbacks.progress_bar: the bar's (training/callbacks.py: StepProgressBar, which divides by the rate)."""

    _target_: str = "training.callbacks.StepProgressBar"
    leave: bool = True
    updates_per_second: float = rule(2.0, 0.1, why="how often the bar moves")


@dataclass
class CsvSettings:
    """logger.csv: Lightning's CSVLogger settings the project supports."""

    _target_: str = "lightning.pytorch.loggers.CSVLogger"
    save_dir: str | None = None
    name: str | None = None
    flush_logs_every_n_steps: int = rule(100, 1)


# The nodes of Lightning's objects that the project configures, and their declarations
LIGHTNING = {
    "trainer": TrainerSettings,
    "callbacks.early_stopping": EarlyStoppingSettings,
    "callbacks.progress_bar": ProgressBarSettings,
    "logger.csv": CsvSettings,
}
OURS = ("model", "data", "optim", "analysis", "callbacks")  # nodes (or groups of nodes) of our objects


def schema_of(target: str) -> type | None:
    """The structured config of a ``_target_``'s arguments: each a list where it takes only a list (or null), else
    any value (the object checks it); None when it takes any keyword (``**settings``) or cannot be read."""
    import hydra

    try:
        obj = hydra.utils.get_object(target)
        parameters = inspect.signature(obj).parameters
        plain_class = isinstance(obj, type) and not dataclasses.is_dataclass(obj)
        hints = typing.get_type_hints(obj.__init__ if plain_class else obj)
    except Exception:  # noqa: BLE001 -- no signature to go by: the object checks its own
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return None
    fields = [("_target_", str, field(default=target))]
    for name, p in parameters.items():
        default = p.default if isinstance(p.default, (list, tuple)) else None  # for the message's example
        hint = hints.get(name, Any)  # its own annotation: what the message says it takes
        fields.append((name, _shape(hint), field(default=MISSING, metadata={"example": default, "hint": hint})))
    return dataclasses.make_dataclass(f"{target.rpartition('.')[2]}Settings", fields)


def _shape(hint):
    """What OmegaConf checks of an argument of ours: a list (or null, where it may be one), or any value."""
    kinds = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    lists = [k for k in kinds if typing.get_origin(k) in (list, tuple) or k in (list, tuple)]
    nullable = type(None) in kinds
    if not lists or len(lists) + nullable < len(kinds):  # not a list only (trainer.devices: a list or a number)
        return Any
    return Optional[list[Any]] if nullable else list[Any]  # noqa: UP045 -- OmegaConf reads typing's Optional


def _values(node: DictConfig) -> dict:
    """A node's settings, interpolations resolved but Hydra's (where files go: known once Hydra runs the job); a group
    of settings within it is checked on its own (:func:`check_settings`)."""
    raw = OmegaConf.to_container(node, resolve=False)
    return {
        k: {} if isinstance(v, dict) else v if isinstance(v, str) and "${hydra:" in v else node[k]
        for k, v in raw.items()
        if k != "hydra"
    }


def _shown(value) -> str:
    return "null" if value is None else repr(value)


def _named(key: str, name) -> str:
    return f"{key}.{name}" if key else str(name)


def check_node(schema: type, node: DictConfig, key: str = "") -> None:
    """Raise ValueError (one line naming the setting) for a setting ``schema`` lacks, a value of the wrong type, or
    one its :class:`Rule` refuses."""
    values = _values(node)
    hints = typing.get_type_hints(schema)
    declared = {f.name: f for f in dataclasses.fields(schema)}
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), values)
    except ConfigKeyError as e:
        name = str(e.key)
        supported = [n for n in declared if n not in NOT_VALUES]
        hint = did_you_mean(name, supported, f"+{key}." if key else "+")  # only +key=value adds past Hydra's check
        raise ValueError(
            f"+{_named(key, name)}: not a setting this project supports{hint}; the supported ones: "
            + ", ".join(supported)
        ) from None
    except ValidationError as e:
        f = declared[e.key]
        example = f.metadata.get("example")
        said = allowed(f.metadata.get("hint", hints[e.key]), f.metadata.get("rule"))
        said += f" such as [{', '.join(map(as_written, example))}]" if example else ""
        shown = as_written(values[e.key]) if "hint" in f.metadata else _shown(values[e.key])  # ours: as typed
        raise ValueError(f"{_named(key, e.key)}={shown} is not allowed: use {said}") from None
    for name, f in declared.items():
        found = f.metadata.get("rule")
        if found is None or name not in values:
            continue
        value = merged[name]
        nullable = type(None) in typing.get_args(hints[name])  # an Any-typed one: null only among its choices
        if (value is None and not (nullable or None in (found.choices or ()))) or (
            value is not None and not found.accepts(value)
        ):
            raise ValueError(
                f"{_named(key, name)}={_shown(values[name])} is not allowed: use {allowed(hints[name], found)}"
            )


def check_settings(cfg: DictConfig) -> None:
    """Every node of the composed config against its declaration: the run's keys, Lightning's objects', ours."""
    check_node(RunSettings, cfg)
    for where, schema in LIGHTNING.items():
        node = OmegaConf.select(cfg, where, throw_on_resolution_failure=False)
        if isinstance(node, DictConfig):
            check_node(schema, node, where)
    for where in OURS:
        node = cfg.get(where)
        nodes = node.items() if where == "callbacks" and isinstance(node, DictConfig) else [(None, node)]
        for name, each in nodes:
            key = where if name is None else f"{where}.{name}"
            if key in LIGHTNING or not isinstance(each, DictConfig) or "_target_" not in each:
                continue
            schema = schema_of(each._target_)
            if schema is not None:
                check_node(schema, each, key)
