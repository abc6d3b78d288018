"""The composed config, checked: every mistake becomes one :class:`ConfigError` line naming the key.

Each rule lives once. Every setting is declared with its type (training/settings.py: a key nothing takes, a value
of the wrong type or out of range); our objects (the data module, the model, the optimizer settings, the analysis,
the callbacks) check their own values in their own words -- ``digits=0: must be a whole number >= 1`` -- and
:func:`build` names the config key when it instantiates them (``data.digits=0: ...``); wandb's settings are checked
by wandb's own rules (training/loggers.py). The rules here hold no single setting: the devices there are, the sizes
this machine can hold, a callback the run cannot do without, several nodes with no launcher to start them.
"""

from __future__ import annotations

import datetime
import os
import re

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf

from storage.rundir import HYDRA_FILES, RunDirError, resume_target, run_dir_for
from training.limits import check_sizes
from training.settings import check_settings


class ConfigError(ValueError):
    """A user-facing configuration mistake: reported as one line, never a traceback."""


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


def check(cfg: DictConfig) -> None:
    """Raise :class:`ConfigError` for the first setting its declaration refuses (training/settings.py), or a value
    that breaks a rule no single setting holds."""
    try:
        check_settings(cfg)
    except ValueError as e:
        raise ConfigError(str(e)) from None
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
    """A group of settings where one is expected; callbacks the run needs are there; several nodes only under a
    launcher (without one the first node waits for the others forever)."""
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


def build(node: DictConfig, key: str, **kwargs):
    """hydra.utils.instantiate(node) with the object's own complaint about an argument turned into one
    ConfigError line that names the config key: ``digits=0: ...`` from ``data`` -> ``data.digits=0: ...``."""
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
