"""The composed config, checked: every mistake becomes one :class:`ConfigError` line naming the key.

Each rule lives once. Our objects (the data module, the model, the optimizer settings, the analysis, the
callbacks) check their own arguments in their own words -- ``digits=0: must be a whole number >= 1`` --
and :func:`build` names the config key when it instantiates them (``data.digits=0: ...``). The rules below
are for the keys no object of ours owns: the seed, the settings of the Lightning objects the project configures
(the Trainer, two callbacks, the csv logger; wandb's are checked by wandb's own rules, training/loggers.py). Any
other setting of those objects is one the project does not support, and says so; so does a callback the run
cannot do without switched off, and several nodes with no launcher to start them.
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import math
import os
import re
import types
import typing

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf

from storage.rundir import HYDRA_FILES, RunDirError, resume_target, run_dir_for
from training.limits import check_sizes, machine_cores


class ConfigError(ValueError):
    """A user-facing configuration mistake: reported as one line, never a traceback."""


def _as_written(value) -> str:
    """A value as the command line writes it: true, false, null."""
    return "true" if value is True else "false" if value is False else "null" if value is None else str(value)


@dataclasses.dataclass(frozen=True)
class Rule:
    kind: str  # "whole", "number", "choice" or "text"
    low: float | None = None
    high: float | None = None
    choices: tuple = ()
    nullable: bool = False
    why: str = ""  # where a bound comes from, when it is not obvious

    def allowed(self) -> str:
        if self.kind == "choice":
            text = "one of " + ", ".join(map(_as_written, self.choices)) if self.choices else ""
        elif self.kind == "text":
            text = "a name"
        else:
            text = "a whole number" if self.kind == "whole" else "a number"
            if self.low is not None and self.high is not None:
                text += f" in [{self.low}, {self.high}]"
            elif self.low is not None:
                text += f" >= {self.low}"
        null = ("" if not self.nullable else ", or null" if text else "null") + (f" ({self.why})" if self.why else "")
        return text + null

    def accepts(self, value) -> bool:
        if value is None:
            return self.nullable
        if self.kind == "choice":
            return value in self.choices
        if self.kind == "text":
            return isinstance(value, str) and value != ""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.kind == "whole" and not isinstance(value, int):
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


PRECISIONS = ("32-true", 32, "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", 64)  # precision=32 is an int
YES_NO = (True, False)
RULES: dict[str, Rule] = {
    "seed": Rule("whole", 0, 2**32 - 1),  # the range Lightning's seed_everything accepts
    # more threads than cores never makes a step faster (they take turns on the same cores); far more crash
    # (threads=100000 segfaulted inside OpenMP), so the bound is the cores this process may use
    "threads": Rule("whole", 1, machine_cores(), nullable=True, why=f"this machine has {machine_cores()} cores"),
    "matmul_precision": Rule("choice", choices=("highest", "high", "medium")),
    "target_accuracy": Rule("number", 0, 1, nullable=True),
    "target_loss": Rule("number", 0, nullable=True),
    "verbose": Rule("choice", choices=(True, False)),
    "trainer.max_steps": Rule("whole", 1),
    "trainer.val_check_interval": Rule("whole", 1),
    "trainer.log_every_n_steps": Rule("whole", 1),
    "trainer.gradient_clip_val": Rule("number", 0, nullable=True),
    "trainer.precision": Rule("choice", choices=PRECISIONS),
    "trainer.accelerator": Rule("choice", choices=("cpu", "gpu", "cuda", "mps", "auto")),
    # Lightning's ways to train less that would finish "ok" with an untrained model: a run is as long as max_steps
    "trainer.max_epochs": Rule("choice", choices=(-1,), nullable=True, why="set trainer.max_steps instead"),
    "trainer.limit_train_batches": Rule("choice", choices=(1.0,), nullable=True, why="set trainer.max_steps instead"),
    "trainer.fast_dev_run": Rule("choice", choices=(False,), why="for a short run set trainer.max_steps"),
    "trainer.check_val_every_n_epoch": Rule("choice", nullable=True, why="the training stream has no epochs"),
    "trainer.num_sanity_val_steps": Rule("whole", 0),
    "trainer.enable_model_summary": Rule("choice", choices=YES_NO),
    "trainer.enable_progress_bar": Rule("choice", choices=YES_NO),
    "trainer.deterministic": Rule("choice", choices=(*YES_NO, "warn"), nullable=True),
    "trainer.benchmark": Rule("choice", choices=YES_NO, nullable=True),
    # several processes: trainer=ddp (Lightning starts them on this machine); several machines: a launcher's
    "trainer.strategy": Rule("choice", choices=("auto", "ddp")),
    "trainer.num_nodes": Rule("whole", 1),
    # the Lightning callbacks the project configures (configs/callbacks/default.yaml)
    "callbacks.early_stopping.monitor": Rule("choice", choices=("val/exact_match", "val/loss", "val/digit_accuracy")),
    "callbacks.early_stopping.mode": Rule("choice", choices=("max", "min")),
    "callbacks.early_stopping.patience": Rule("whole", 0, why="validations without improvement"),
    "callbacks.early_stopping.stopping_threshold": Rule("number", nullable=True),
    "callbacks.early_stopping.loss_below": Rule("number", 0, nullable=True),
    "callbacks.progress_bar.leave": Rule("choice", choices=YES_NO),
    # StepProgressBar's own argument (training/callbacks.py), which divides by it
    "callbacks.progress_bar.updates_per_second": Rule("number", 0.1, why="how often the bar moves"),
    "logger.wandb.mode": Rule("choice", choices=("offline", "online", "disabled")),  # the others: training/loggers.py
    "logger.csv.name": Rule("text", nullable=True),
    "logger.csv.flush_logs_every_n_steps": Rule("whole", 1),
}


# The objects of Lightning's that the project configures: every key of theirs has a rule above. Any other
# setting of theirs (+trainer.accumulate_grad_batches, +trainer.max_time, +callbacks.early_stopping.strict) is one
# the project does not support: each training batch is a function of (seed, step), a run is as long as max_steps.
MANAGED = ("trainer", "callbacks.early_stopping", "callbacks.progress_bar", "logger.csv")
NOT_VALUES = ("_target_", "default_root_dir", "save_dir")  # code, and where the files go: training/cli.py refuses both
CHECKED_BELOW = ("trainer.devices",)  # a whole number or auto: check()
# Callbacks a run cannot do without: switched off, the run would crash after its training and test
REQUIRED_CALLBACKS = {
    "best_checkpoint": "it keeps checkpoints/best.ckpt, the model the test, calc.py and resume= load",
}
# A multi-node run is started on every node by a launcher, which tells each process where the others are
LAUNCHER_VARIABLES = ("MASTER_ADDR", "WORLD_SIZE", "NODE_RANK", "TORCHELASTIC_RUN_ID", "SLURM_NTASKS")
MULTI_NODE = (
    "torchrun --nnodes=N --nproc-per-node=M --rdzv-endpoint=HOST:29500 train.py trainer=ddp "
    "trainer.devices=M +trainer.num_nodes=N on every node, or on SLURM (docs/reliability.md)"
)


def _present(cfg: DictConfig, key: str):
    """(True, value) when ``key`` is set in cfg; (False, None) when its group is switched off or absent."""
    node = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            return False, None
        node = node[part]
    return True, node


def check(cfg: DictConfig) -> None:
    """Raise :class:`ConfigError` for the first value that breaks a rule of a key no object owns."""
    for key, rule in RULES.items():
        present, value = _present(cfg, key)
        if present and not rule.accepts(value):
            raise ConfigError(f"{key}={value!r} is not allowed: use {rule.allowed()}")
    check_supported(cfg)
    devices = cfg.trainer.get("devices", 1)
    if not (devices == "auto" or (isinstance(devices, int) and not isinstance(devices, bool) and devices >= 1)):
        raise ConfigError(f"trainer.devices={devices!r} is not allowed: use a whole number >= 1 or auto")
    check_device(cfg.trainer.accelerator, devices)
    too_big = check_sizes(cfg)  # before any object is built: nothing is allocated yet
    if too_big:
        raise ConfigError(too_big)
    if cfg.resume is not None:
        try:
            resume_target(cfg.resume)
        except RunDirError as e:
            raise ConfigError(str(e)) from None


def check_supported(cfg: DictConfig) -> None:
    """Every setting of a Lightning object the project configures has a rule; callbacks the run needs are there;
    several nodes only under a launcher (without one the first node waits for the others forever)."""
    for node in MANAGED:
        present, settings = _present(cfg, node)
        if not present or not isinstance(settings, DictConfig):
            continue
        supported = [key.rpartition(".")[2] for key in (*RULES, *CHECKED_BELOW) if key.rpartition(".")[0] == node]
        for key in settings:
            if key not in supported and key not in NOT_VALUES:
                raise ConfigError(
                    f"{node}.{key} is a Lightning setting this project does not support; the supported ones: "
                    f"{', '.join(supported)}"
                )
    for group in ("callbacks", "logger"):
        for name, node in (cfg.get(group) or {}).items():
            if node is not None and not isinstance(node, DictConfig):
                why = f"{group}.{name} is a group of settings; null switches it off"
                raise ConfigError(f"{group}.{name}={node!r}: {why}")
    callbacks = cfg.get("callbacks") or {}
    for name, why in REQUIRED_CALLBACKS.items():
        if not callbacks.get(name):
            raise ConfigError(f"callbacks.{name} cannot be switched off: {why}")
    nodes = cfg.trainer.get("num_nodes", 1)
    if nodes > 1 and not any(os.environ.get(variable) for variable in LAUNCHER_VARIABLES):
        raise ConfigError(
            f"trainer.num_nodes={nodes}: no launcher started this process (none of {', '.join(LAUNCHER_VARIABLES)} "
            f"is set), so the other nodes would never come; start it with  {MULTI_NODE}"
        )


def check_device(accelerator: str, devices: int | str = 1) -> None:
    """A device that is not there -- or fewer GPUs than trainer.devices asks for (trainer=ddp's 2 on a one-GPU
    machine, where accelerator=auto picks CUDA) -- is one line, not a Lightning error after the model is built."""
    from model.device import device_unavailable, gpus_short, remedy  # torch: only once a config is checked

    why = None if accelerator == "auto" else device_unavailable(accelerator)
    if why is not None:
        raise ConfigError(f"trainer.accelerator={accelerator}: {why}; {remedy(accelerator, 'trainer=cpu')}")
    on_cuda = accelerator in ("gpu", "cuda") or (accelerator == "auto" and device_unavailable("cuda") is None)
    short = gpus_short(devices) if on_cuda and isinstance(devices, int) else None
    if short is not None:
        raise ConfigError(
            f"trainer.devices={devices} on CUDA (trainer.accelerator={accelerator}): {short}; use fewer "
            f"trainer.devices, or trainer.accelerator=cpu for {devices} processes on the CPU"
        )


# How long a process of a multi-process run (trainer=ddp) waits for the others -- in a collective (a step's gradient
# all-reduce, a validation's sums) or for them to start -- before it gives up: a peer that died mid-step ends the run
# within this, not torch's default 30 minutes. A step of ours takes well under a second; a process starting on
# another node (torchrun, SLURM) must arrive within it too.
DDP_TIMEOUT = datetime.timedelta(minutes=2)


def distributed(trainer: DictConfig) -> dict:
    """The Trainer's ``strategy`` argument for trainer.strategy=ddp, and for several nodes (where Lightning's auto
    picks DDP with torch's 30 minutes): Lightning's DDPStrategy with DDP_TIMEOUT (its public argument); nothing for
    the others."""
    if trainer.get("strategy") != "ddp" and trainer.get("num_nodes", 1) == 1:
        return {}
    from lightning.pytorch.strategies import DDPStrategy

    return {"strategy": DDPStrategy(timeout=DDP_TIMEOUT)}


def not_joined(trainer: DictConfig) -> ConfigError:
    """The one line for a process whose run's other processes did not all connect within DDP_TIMEOUT."""
    nodes = trainer.get("num_nodes", 1)
    address = os.environ.get("MASTER_ADDR")
    where = f" at {address}:{os.environ.get('MASTER_PORT', '?')}" if address else ""
    how = f"; start it with  {MULTI_NODE}" if nodes > 1 else ""
    return ConfigError(
        f"trainer.num_nodes={nodes}, trainer.devices={trainer.get('devices', 1)}: the run's other processes did not "
        f"connect{where} within {DDP_TIMEOUT.total_seconds() / 60:g} minutes; nothing was trained{how}"
    )


_ARGUMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(=| )")


def _words(kind) -> str:
    """A type as the command line writes it: list[str] -> "a list of text"."""
    if typing.get_origin(kind) in (list, tuple) or kind in (list, tuple):
        inner = [a for a in typing.get_args(kind) if a is not Ellipsis]
        return "a list" + (f" of {_words(inner[0]).removeprefix('a ').removeprefix('an ')}" if inner else "")
    names = {str: "text", int: "a whole number", float: "a number", bool: "true or false"}
    return names.get(kind, getattr(kind, "__name__", str(kind)))


def check_lists(node: DictConfig, key: str) -> None:
    """A setting its object takes as a list (so its annotation says) given one value or null -- analysis.probes=5,
    analysis.ablation=null -- is one line naming the key and what it takes, before the object meets it in Python's
    words ('int' object is not iterable). The object checks the list's items itself, in its own words."""
    try:
        target = hydra.utils.get_object(node["_target_"])
        plain_class = isinstance(target, type) and not dataclasses.is_dataclass(target)
        hints = typing.get_type_hints(target.__init__ if plain_class else target)  # a dataclass: its fields'
        defaults = inspect.signature(target).parameters
    except Exception:  # noqa: BLE001 -- no annotations to go by (or no _target_): the object checks its own
        return
    for name, value in node.items():
        hint = hints.get(name)
        kinds = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        lists = [kind for kind in kinds if typing.get_origin(kind) in (list, tuple) or kind in (list, tuple)]
        nullable = type(None) in kinds
        if not lists or len(lists) + nullable < len(kinds):  # not a list only (trainer.devices: a list or a number)
            continue
        if OmegaConf.is_list(value) or isinstance(value, (list, tuple)) or (value is None and nullable):
            continue
        default = defaults[name].default if name in defaults else None
        example = f" such as [{', '.join(map(_as_written, default))}]" if isinstance(default, (list, tuple)) else ""
        raise ConfigError(
            f"{key}.{name}={_as_written(value)} is not allowed: use {_words(lists[0])}{example}"
            + (", or null" if nullable else "")
        )


def build(node: DictConfig, key: str, **kwargs):
    """hydra.utils.instantiate(node) with the object's own complaint about an argument turned into one
    ConfigError line that names the config key: ``digits=0: ...`` from ``data`` -> ``data.digits=0: ...``."""
    check_lists(node, key)
    try:
        return hydra.utils.instantiate(node, **kwargs)
    except InstantiationException as e:
        cause = e.__cause__ or e
        if not isinstance(cause, (ValueError, TypeError)) and type(cause).__name__ != "MisconfigurationException":
            raise  # Lightning's refusal of its settings (a MisconfigurationException) is a configuration mistake too
        message = str(cause).strip().splitlines()[0]
        if isinstance(cause, TypeError) and "unexpected keyword argument" in message:
            name = message.rsplit("'", 2)[-2] if message.count("'") >= 2 else "?"
            raise ConfigError(f"{key}.{name} is not a setting of {key}; see  python train.py --cfg job") from None
        match = _ARGUMENT.match(message)
        if match and match.group(1) in node:
            message = f"{key}.{message}"
        elif not message.startswith(key):
            message = f"{key}: {message}"
        raise ConfigError(message) from None


def register_resolvers() -> None:
    """``${run_dir:${resume}}`` and ``${hydra_subdir:${resume}}`` for configs/train.yaml."""
    if not OmegaConf.has_resolver("run_dir"):
        OmegaConf.register_new_resolver("run_dir", run_dir_for, use_cache=True)
        # a resumed run keeps the .hydra/ of the run it continues; this invocation's goes beside it
        OmegaConf.register_new_resolver("hydra_subdir", lambda resume: HYDRA_FILES[resume is not None])
