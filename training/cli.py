"""The command line, checked before Hydra starts: a typo or a used run directory is one line, and Hydra
writes nothing (no .hydra/ into someone else's run, no empty run directory left behind).

Hydra's own errors for these are several lines of advice that does not fit this project (``+model.n_head=8``
"appends" a key that nothing reads); here they become ``error: model.n_head is not a setting; did you mean
model.n_heads?``. Value checks come later, with the objects that own them (training/config.py).
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict

from storage.rundir import RunDir, RunDirError, SweepDir, hydra_override
from training.config import ConfigError, register_resolvers

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
HYDRA_FLAGS_WE_CHECK = ("-m", "--multirun")
NEEDED_GROUPS = ("model", "data", "optim", "trainer")  # a run cannot be built without one of each
OPTIONAL_GROUPS = ("analysis", "logger", "callbacks", "position", "experiment")  # ~group switches it off
OFF_BY_DEFAULT = ("position", "experiment")  # none unless chosen (configs/train.yaml)
CODE_KEYS = ("_target_", "_args_", "_partial_", "_recursive_", "_convert_")  # what Hydra instantiates
PLACEMENT_KEYS = ("run_dir", "save_dir", "default_root_dir")  # where the run's files go: its run directory


def compose_train_config(overrides: list[str]) -> DictConfig:
    """configs/train.yaml with these overrides, composed as train.py composes it (tests use this too)."""
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name="train", overrides=overrides, return_hydra_config=True)


def with_run_dir(cfg: DictConfig, run_dir) -> DictConfig:
    """Give a composed config its run directory, as @hydra.main does, so ``${hydra:...}`` resolves (for building a
    run's objects in-process: the benchmark and the tests)."""
    from hydra.core.hydra_config import HydraConfig

    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(run_dir)
    HydraConfig.instance().set_config(cfg)
    return cfg


def _did_you_mean(word: str, options, prefix: str = "") -> str:
    close = difflib.get_close_matches(word, [str(o) for o in options if str(o) != word], n=1, cutoff=0.6)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""


def _group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIGS / group).glob("*.yaml")) if (CONFIGS / group).is_dir() else []


def _explain(message: str, base: DictConfig) -> str:
    """Hydra's composition error -> one line naming the key or option, with the nearest valid one."""
    found = re.search(r"Could not (?:override|append to) '([^']+)'", message)
    if found:
        key = found.group(1)
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(base, parent) if parent else base
        if isinstance(node, DictConfig):
            known = _did_you_mean(leaf, node.keys(), f"{parent}." if parent else "")
            return f"{key} is not a setting{known}; see them all with  python train.py --cfg job"
        groups = [p.name for p in CONFIGS.iterdir() if p.is_dir()]
        return f"{key} is not a setting or config group{_did_you_mean(key, list(base.keys()) + groups)}"
    found = re.search(r"An item is already at '([^']+)'", message)
    if found:
        return f"+{found.group(1)}=...: {found.group(1)} is set already; write {found.group(1)}=... (no +)"
    found = re.search(r"Multiple values for ([\w/]+)", message)
    if found:
        group = found.group(1)
        return f"+{group}=...: {group} is chosen in the defaults already; write {group}=... (no +)"
    found = re.search(r"Could not (?:find|load) '([^']+)/([^']+)'", message)
    if found and found.group(1) == "hydra/launcher":  # our launcher configs extend the plugins' own
        return f'the {found.group(2)} launcher is not installed: pip install -e ".[sweep]"'
    if found:
        group, option = found.groups()
        options = _group_options(group)
        return (
            f"{group}={option} is not an option of {group}{_did_you_mean(option, options)}; "
            f"choose one of {', '.join(options)}"
        )
    return message.strip().splitlines()[0]


def _first_values(overrides) -> list[str]:
    """Sweep overrides (a=1,2) -> their first value, so one composition checks every key of a multirun."""
    single = []
    for o in overrides:
        if o.is_sweep_override():
            value = next(iter(o.sweep_string_iterator()))
            single.append(f"{o.get_key_element()}={value}")
        else:
            single.append(o.input_line)
    return single


def _check_additions(overrides, cfg: DictConfig) -> None:
    """``+key=value`` is for arguments an object really takes (e.g. +trainer.num_nodes=2), nothing else."""
    for o in overrides:
        if not o.is_add() or o.key_or_group.startswith("hydra") or (CONFIGS / o.key_or_group).is_dir():
            continue  # only added keys are checked (+experiment=add10 adds a group option, which Hydra checks)
        parent, _, leaf = o.key_or_group.rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else None
        target = node.get("_target_") if isinstance(node, DictConfig) else None
        if target:
            module, _, name = target.rpartition(".")
            obj = getattr(__import__(module, fromlist=[name]), name)
            params = inspect.signature(obj).parameters
            if leaf in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
                continue
            raise ConfigError(
                f"+{o.key_or_group}: {target} takes no argument {leaf!r}{_did_you_mean(leaf, params, f'+{parent}.')}"
            )
        raise ConfigError(
            f"+{o.key_or_group}: adds a key that nothing reads{_did_you_mean(o.key_or_group, _all_keys(cfg))}"
        )


def _check_deletions(overrides) -> None:
    """``~group`` switches an optional group off (~analysis is analysis=none); a group the run needs, or a single
    setting, cannot be deleted (the run would fail to build, far from the command line); ``group=null`` is not an
    option."""
    for o in overrides:
        key = o.key_or_group
        if (CONFIGS / key).is_dir() and not o.is_delete() and o.value() is None:  # Hydra: "must be a string or a list"
            off = f"; to switch it off: {key}=none" if "none" in _group_options(key) else ""
            off = "; leave it out for none" if key in OFF_BY_DEFAULT else off
            raise ConfigError(f"{key}=null: choose one of {', '.join(_group_options(key))}{off}")
        if not o.is_delete() or key.startswith("hydra"):
            continue
        if key in NEEDED_GROUPS:
            options = ", ".join(_group_options(key))
            raise ConfigError(f"~{key}: a run cannot be built without its {key} group; choose {key}=... ({options})")
        if key not in OPTIONAL_GROUPS and key.rpartition(".")[0] not in ("callbacks", "logger"):
            raise ConfigError(f"~{key}: a setting cannot be deleted; give it a value (python train.py --cfg job)")


def _check_placements(overrides) -> None:
    """What names code (``_target_``) and where the run's files go (``run_dir``, ``save_dir``) are the project's:
    objects are chosen with config groups, and every file goes into the run directory (hydra.run.dir=...)."""
    for o in overrides:
        key = o.key_or_group
        leaf = key.rpartition(".")[2]
        if o.is_delete() or key.startswith("hydra"):
            continue
        if leaf in CODE_KEYS:
            raise ConfigError(f"{key}: names the code to run, which the project's configs choose; pick a config group")
        if leaf in PLACEMENT_KEYS:
            raise ConfigError(f"{key}: the run's files all go into its run directory; set hydra.run.dir=... instead")


def _all_keys(cfg: DictConfig) -> list[str]:
    """Every leaf key of ``cfg`` but Hydra's, dotted; an interpolation is a leaf, left unresolved."""

    def leaves(node: dict, prefix: str):
        for key, value in node.items():
            yield from leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else (f"{prefix}{key}",)

    raw = OmegaConf.to_container(cfg, resolve=False)
    return list(leaves({key: value for key, value in raw.items() if key != "hydra"}, ""))


def _check_resolves(cfg: DictConfig) -> None:
    """Every interpolation of ours resolves (a self-reference or a missing key is one line, not a traceback).
    ``${hydra:...}`` ones resolve only once Hydra runs the job, and are Hydra's own."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    for key in _all_keys(cfg):
        value = raw
        for part in key.split("."):
            value = value[part]
        if isinstance(value, str) and "${" in value and "${hydra:" not in value:
            try:
                OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
            except Exception as e:  # noqa: BLE001 -- omegaconf raises several kinds
                raise ConfigError(f"{key}={value}: cannot be resolved ({str(e).splitlines()[0]})") from None


def check_command_line(argv: list[str], claim: bool = False) -> RunDir | SweepDir | None:
    """Exit 2 with one line for an override Hydra cannot apply or a run directory already used.

    With ``claim`` (train.py), also a run or sweep directory in use by another process, or a sweep directory used
    already; else the directory is claimed for this process -- before Hydra writes its files there, so a refused
    command never touches another run's .hydra/ -- and returned (the caller releases it). It is added to ``argv``
    (hydra.run.dir= / hydra.sweep.dir=) when Hydra would otherwise pick it again, from the clock."""
    if any(a.startswith("-") and a not in HYDRA_FLAGS_WE_CHECK for a in argv):
        return None  # --help, --cfg, -cp ...: Hydra's own business
    if os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("RANK", "0") != "0":
        return None  # a DDP worker re-running the command: rank 0 has checked it
    multirun = any(a in HYDRA_FLAGS_WE_CHECK for a in argv)
    texts = [a for a in argv if a not in HYDRA_FLAGS_WE_CHECK]
    try:
        try:
            overrides = OverridesParser.create().parse_overrides(texts)
        except Exception as e:  # noqa: BLE001 -- Hydra's parse errors
            raise ConfigError(f"cannot read the command line: {str(e).splitlines()[0]}") from None
        _check_deletions(overrides)
        _check_placements(overrides)
        try:
            cfg = compose_train_config(_first_values(overrides))
        except Exception as e:  # noqa: BLE001 -- composition errors of every kind
            raise ConfigError(_explain(str(e), compose_train_config([]))) from None
        _check_additions(overrides, cfg)
        _check_resolves(cfg)
        if not claim:
            if not multirun and cfg.resume is None:
                RunDir(cfg.hydra.run.dir).refuse_if_used()
            return None
        if multirun:
            claimed = SweepDir(cfg.hydra.sweep.dir)
            claimed.claim()
            key = "hydra.sweep.dir"
        else:
            claimed = RunDir(cfg.hydra.run.dir)
            claimed.claim(resuming=cfg.resume is not None)
            key = "hydra.run.dir"
    except (ConfigError, RunDirError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if not any(o.key_or_group == key for o in overrides):  # Hydra resolves the default again: pin this one
        argv.append(hydra_override(key, claimed.path))  # an argument, not a shell word
    return claimed
