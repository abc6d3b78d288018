"""Check a composed training config before anything is built or written.

Every user-facing key has a rule (its type and range); a broken rule is a :class:`ConfigError` whose
message is one line naming the key, the value given and what is allowed. Rules that tie several keys
together (d_model divisible by n_heads, operand digits the arithmetic can hold, ...) live with the
objects they describe and are checked when train.py builds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from omegaconf import DictConfig, OmegaConf


class ConfigError(ValueError):
    """A user-facing configuration mistake: reported as one line, never a traceback."""


@dataclass(frozen=True)
class Rule:
    kind: str  # "whole", "number", "flag" or "choice"
    low: float | None = None
    high: float | None = None
    high_open: bool = False  # high itself not allowed
    low_open: bool = False
    choices: tuple = ()
    nullable: bool = False

    def allowed(self) -> str:
        if self.kind == "flag":
            text = "true or false"
        elif self.kind == "choice":
            text = "one of " + ", ".join(map(str, self.choices))
        else:
            text = "a whole number" if self.kind == "whole" else "a number"
            if self.low is not None and self.high is not None:
                text += f" in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"
            elif self.low is not None:
                text += f" {'>' if self.low_open else '>='} {self.low}"
        return text + (", or null" if self.nullable else "")

    def accepts(self, value) -> bool:
        if value is None:
            return self.nullable
        if self.kind == "flag":
            return isinstance(value, bool)
        if self.kind == "choice":
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind == "whole" and not isinstance(value, int):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or (value < self.high or (not self.high_open and value == self.high))


def whole(low: int = 1, nullable: bool = False) -> Rule:
    return Rule("whole", low=low, nullable=nullable)


def number(low=None, high=None, low_open=False, high_open=False, nullable=False) -> Rule:
    return Rule("number", low, high, high_open, low_open, nullable=nullable)


FLAG = Rule("flag")
PRECISIONS = ("32-true", "32", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", "64")

RULES: dict[str, Rule] = {
    "seed": whole(0),
    "threads": whole(1, nullable=True),
    "target_accuracy": number(0, 1, nullable=True),
    "model.d_model": whole(1),
    "model.n_heads": whole(1),
    "model.n_kv_heads": whole(1, nullable=True),
    "model.n_layers": whole(1),
    "model.mlp_ratio": whole(1),
    "model.dropout": number(0, 1, high_open=True),
    "model.bias": FLAG,
    "model.tie_weights": FLAG,
    "data.digits": whole(1),
    "data.reverse_answer": FLAG,
    "data.batch_size": whole(1),
    "data.eval_batch_size": whole(1),
    "data.streaming": FLAG,
    "data.n_train": whole(1),
    "data.n_val": whole(1),
    "data.n_test": whole(1),
    "data.val_fraction": number(0, 0.5, low_open=True, high_open=True),
    "data.test_fraction": number(0, 0.5, low_open=True, high_open=True),
    "optim.lr": number(0, low_open=True),
    "optim.weight_decay": number(0),
    "optim.warmup_steps": whole(0),
    "optim.min_lr_ratio": number(0, 1),
    "trainer.max_steps": whole(1),
    "trainer.val_check_interval": whole(1),
    "trainer.log_every_n_steps": whole(1),
    "trainer.gradient_clip_val": number(0, nullable=True),
    "trainer.precision": Rule("choice", choices=PRECISIONS),
    "trainer.accelerator": Rule("choice", choices=("cpu", "gpu", "cuda", "mps", "tpu", "auto")),
    "logger.wandb.mode": Rule("choice", choices=("offline", "online", "disabled")),
    "callbacks.attention_maps.every_n_val": whole(1),
    "analysis.enabled": FLAG,
    "analysis.n_problems": whole(1, nullable=True),
    "analysis.prune": Rule("choice", choices=("ranked", "greedy"), nullable=True),
    "analysis.tolerance": number(0, 1, high_open=True),
}


def _present(cfg: DictConfig, key: str):
    """(True, value) when ``key`` is set in cfg; (False, None) when its group is switched off or absent."""
    node = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            return False, None
        node = node[part]
    return True, node


def check(cfg: DictConfig) -> None:
    """Raise :class:`ConfigError` for the first value that breaks a rule."""
    for key, rule in RULES.items():
        present, value = _present(cfg, key)
        if present and not rule.accepts(value):
            raise ConfigError(f"{key}={value!r} is not allowed: use {rule.allowed()}")
    devices = cfg.trainer.get("devices", 1)
    if not (devices == "auto" or (isinstance(devices, int) and not isinstance(devices, bool) and devices >= 1)):
        raise ConfigError(f"trainer.devices={devices!r} is not allowed: use a whole number >= 1 or auto")
    ops = cfg.data.operators
    if not isinstance(ops, (str, Sequence)) or isinstance(ops, bytes):
        raise ConfigError(f"data.operators={ops!r} is not allowed: use a string of '+', '-', '*' such as '+-'")
    kinds = cfg.analysis.ablation
    kinds = list(kinds) if OmegaConf.is_list(kinds) else kinds
    if not isinstance(kinds, (list, tuple)) or any(k not in ("zero", "mean") for k in kinds):
        raise ConfigError(f"analysis.ablation={kinds!r} is not allowed: use a list of zero and/or mean")
    if cfg.analysis.probes is not None and not cfg.analysis.probes:
        raise ConfigError("analysis.probes is empty: give at least one problem (e.g. [456+789]) or null for the "
                          "task's own")
    if cfg.resume is not None:
        resume_target(cfg.resume)


def run_directory(resume: str | None) -> str:
    """Where this invocation's run lives: a new timestamped folder, or the folder of the run it resumes."""
    if resume is not None:
        path = Path(str(resume)).expanduser()
        if path.is_dir():
            return str(path)
        if path.is_file() and path.parent.name == "checkpoints":
            return str(path.parent.parent)
    return f"runs/{datetime.now():%Y-%m-%d_%H-%M-%S}"


def register_resolvers() -> None:
    """``${run_dir:${resume}}`` and ``${hydra_subdir:${resume}}`` for configs/train.yaml."""
    if not OmegaConf.has_resolver("run_dir"):
        OmegaConf.register_new_resolver("run_dir", run_directory)
        # a resumed run keeps the .hydra/ of the run it continues; this invocation's goes beside it
        OmegaConf.register_new_resolver("hydra_subdir", lambda resume: ".hydra" if resume is None else ".hydra-resume")


def resume_target(resume: str) -> Path:
    """A run directory or a .ckpt file to resume from -> the checkpoint file; ConfigError if there is none."""
    path = Path(str(resume)).expanduser()
    if path.is_dir():
        for candidate in (path / "checkpoints" / "interrupted.ckpt", path / "checkpoints" / "last.ckpt"):
            if candidate.exists():
                return candidate
        raise ConfigError(f"resume={resume}: no checkpoints/interrupted.ckpt or checkpoints/last.ckpt in that "
                          "directory; give a run directory that was interrupted, or a .ckpt file")
    if path.is_file() and path.suffix == ".ckpt":
        return path
    raise ConfigError(f"resume={resume}: no such run directory or .ckpt file")
