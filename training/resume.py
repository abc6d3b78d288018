"""resume=: a run directory is data, never code.

A run directory is something people zip and share, so what it holds is read as values only. The config a run
continues with is the project's own, composed from configs/ with the groups the run chose
(``.hydra/hydra.yaml``: ``runtime.choices``, each checked to be an option in configs/), and the run's
``config.yaml`` supplies the values of the settings that config has. Whatever names code -- a ``_target_``
(or ``_partial_``, ``_args_``, ...) -- always comes from the project; one in the file that differs, a key the
project does not have, a group where a value belongs, an interpolation, are each refused with one line. Where
files go (``${hydra:runtime.output_dir}``) is the run directory being resumed, never a path from the file.
The result is then checked against the checkpoint's own hyper-parameters (its model config and data format,
read with ``weights_only=True``): a disagreement names the key and both values.
"""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from storage.messages import one_line
from storage.rundir import RunDir, RunDirError, parse_yaml, resume_target
from training.config import ConfigError, register_resolvers

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
WANDB_ID = re.compile(r"[^\s:;,#?/'](?:[^:;,#?/']{0,126}[^\s:;,#?/'])?")  # what wandb takes as a run's id
OPTION = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")  # a config option's file name, no path


# Where a ``_target_`` the project once named now lives: an older run's config.yaml names the old path, and resumes.
MOVED_TARGETS = {
    "model.module.AdamWSchedule": "training.optim.OptimConfig",
    "model.transformer.TransformerConfig": "model.build.transformer_config",  # the place fields grouped
    "data.datamodule.ArithmeticDataModule": "data.build.data_settings",  # the data module is built from it
    "data.arithmetic.DataConfig": "data.build.data_settings",  # the lesson's settings parted from the research's
}


def _names_code(key) -> bool:
    return isinstance(key, str) and len(key) > 2 and key.startswith("_") and key.endswith("_")


def _is_interpolation(value) -> bool:
    return isinstance(value, str) and "${" in value


def _plain(value) -> bool:
    """A value that is data whatever reads it: a scalar, or a list of scalars."""
    scalar = (str, int, float, bool, type(None))
    return isinstance(value, scalar) or (isinstance(value, list) and all(isinstance(v, scalar) for v in value))


def read_saved_config(owner: RunDir, label: str) -> dict:
    """The run's config.yaml as plain values (YAML's safe loader: no tags, no objects), or one ConfigError line."""
    try:
        saved = OmegaConf.to_container(parse_yaml(owner.read_text(owner.config) or "", owner.config), resolve=False)
    except Exception as e:  # noqa: BLE001 -- yaml and omegaconf raise several kinds
        raise ConfigError(f"{label}: {owner.config} is not readable YAML ({one_line(e)})") from None
    if not isinstance(saved, dict) or not saved:
        raise ConfigError(f"{label}: {owner.config} is empty or not a mapping of settings; the run's config is unknown")
    return saved


def saved_choices(owner: RunDir, label: str) -> list[str]:
    """``group=option`` for each config group the run chose, from its .hydra/hydra.yaml; each must name an
    option file of this project. No file there: the project's defaults (a key they lack is then refused)."""
    path = owner.hydra_choices
    if not path.is_file():
        return []
    try:
        saved = parse_yaml(owner.read_text(path) or "", path)  # bounded: storage/rundir.py
        choices = OmegaConf.to_container(saved, resolve=False)["hydra"]["runtime"]["choices"]
    except Exception as e:  # noqa: BLE001 -- unreadable, or not the shape Hydra writes
        raise ConfigError(f"{label}: {path} is damaged ({one_line(e)}); the run's config groups are unknown") from None
    if not isinstance(choices, dict):
        raise ConfigError(f"{label}: {path} is damaged (runtime.choices is not a mapping)")
    picked = []
    for group, option in choices.items():
        if not isinstance(group, str) or group.startswith("hydra") or option is None:
            continue
        if not (CONFIGS / group).is_dir():
            raise ConfigError(f"{label}: {path} chooses {group}={option}, and {group} is not a config group here")
        if (
            not isinstance(option, str)
            or not OPTION.match(option)
            or not (CONFIGS / group / f"{option}.yaml").is_file()
        ):
            raise ConfigError(f"{label}: {path} chooses {group}={option!r}, which is not an option of {group} here")
        picked.append(f"{group}={option}")
    return picked


def compose_train_config(overrides: list[str]) -> DictConfig:
    """configs/train.yaml with these overrides, composed as train.py composes it, outside a running @hydra.main (the
    command line's check before Hydra starts, the tests)."""
    from hydra import compose, initialize_config_dir

    register_resolvers()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name="train", overrides=overrides, return_hydra_config=True)


def compose_project(overrides: list[str]) -> DictConfig:
    """configs/train.yaml with these overrides, inside a running @hydra.main or outside it (the tests)."""
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        from hydra import compose

        cfg = compose(config_name="train", overrides=overrides)
    else:
        cfg = compose_train_config(overrides)
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return cfg


def _takes_argument(target: str, name: str) -> bool:
    """Does the project's own ``_target_`` take ``name`` (a ``+trainer.num_nodes=2`` the run was given)?"""
    module, _, attr = target.rpartition(".")
    try:
        params = inspect.signature(getattr(__import__(module, fromlist=[attr]), attr)).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def take_values(schema: dict, saved: dict, path: str = "") -> dict:
    """The project's ``schema`` with the values of ``saved`` where it has the setting; ConfigError otherwise."""
    out = dict(schema)
    for key, value in saved.items():
        where = f"{path}{key}"
        if not isinstance(key, str):
            raise ConfigError(f"{where!r} is not a setting of this project's config")
        if _names_code(key):
            if schema.get(key) != value and not (key == "_target_" and MOVED_TARGETS.get(value) == schema.get(key)):
                ours = f"the project's is {schema[key]!r}" if key in schema else "the project names none there"
                raise ConfigError(f"{where}={value!r} names code ({ours}); a run directory is data, never code")
            continue
        if key not in schema:
            target = schema.get("_target_")
            if target and _plain(value) and not _is_interpolation(value) and _takes_argument(target, key):
                out[key] = value  # an argument of the project's own object, given with +key=value
                continue
            raise ConfigError(f"{where} is not a setting of this project's config")
        mine = schema[key]
        if isinstance(mine, dict):
            if value is None and path == "callbacks.":
                out[key] = None  # a callback switched off (callbacks.attention_maps=null)
            elif isinstance(value, dict):
                out[key] = take_values(mine, value, f"{where}.")
            else:
                raise ConfigError(f"{where}={value!r}: the project's {where} is a group of settings, not a value")
        elif isinstance(mine, str) and mine.startswith("${hydra:"):
            continue  # where the run's files go: the directory being resumed, never a path from the file
        elif isinstance(value, dict) or not _plain(value):
            raise ConfigError(f"{where}: a group of settings where the project's config has a value")
        elif _is_interpolation(value) or (isinstance(value, list) and any(map(_is_interpolation, value))):
            raise ConfigError(f"{where}={value!r}: an interpolation; a saved config.yaml holds resolved values")
        else:
            out[key] = value
    return out


def check_against_checkpoint(cfg: DictConfig, calc, label: str, checkpoint: Path) -> None:
    """The config must describe the network and the problems the checkpoint was trained on."""
    from data.build import FORMAT_KEYS, format_dict, problem_format
    from data.running_product import lines_end_on_next
    from data.working import layout_of

    trained = {f"model.{k}": v for k, v in calc.net.cfg.to_dict().items()}
    trained |= {f"data.{k}": v for k, v in format_dict(calc.fmt).items()}
    data = OmegaConf.to_container(cfg.data)
    try:  # the whole format, as the data module builds it: every field the config has (the rest: their defaults)
        fmt = problem_format(**{name: data[name] for name in FORMAT_KEYS if name in data})
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{label}: config.yaml data.{one_line(e)}") from None
    said = {f"model.{k}": v for k, v in OmegaConf.to_container(cfg.model).items() if not _names_code(k)}
    said |= {f"data.{k}": v for k, v in format_dict(fmt).items()}
    for key, value in said.items():
        if key in trained and not _same(value, trained[key]):
            raise ConfigError(
                f"{label}: config.yaml says {key}={value} but the checkpoint {checkpoint} was trained with "
                f"{key}={trained[key]}; a run continues with the config it was trained with"
            )
    if layout_of(fmt) != layout_of(calc.fmt):  # a key absent from one side above: its default, not compared

        def working(f) -> str:
            ends = lines_end_on_next(f)
            return type(f.working).__name__ + " (lines ending on the next: data.line_end_sees_next)" * ends

        raise ConfigError(
            f"{label}: config.yaml's data settings write {fmt.seq_len}-token problems with {working(fmt)}, but the "
            f"checkpoint {checkpoint} was trained on {calc.fmt.seq_len}-token ones with {working(calc.fmt)}; a run "
            "continues with the config it was trained with"
        )


def _same(a, b) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)  # true is not 1


def check_results(owner: RunDir, label: str) -> None:
    """results.json, when there, must be readable: it holds the training time so far (train_seconds) and the id
    the wandb run goes on under (wandb_run_id), which wandb must take (else the resumed run fails as it starts)."""
    if not owner.results.exists():
        return
    try:
        data = owner.read_json(owner.results, object)  # bounded: storage/rundir.py
    except (OSError, ValueError) as e:
        why = f"not readable JSON: {one_line(e)}"
    else:
        seconds = data.get("train_seconds", 0.0) if isinstance(data, dict) else None
        ok = isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and math.isfinite(seconds)
        why = None if ok and seconds >= 0 else "not the record a run writes"
        wandb_id = data.get("wandb_run_id") if why is None else None
        if wandb_id is not None and not (isinstance(wandb_id, str) and WANDB_ID.fullmatch(wandb_id)):
            raise ConfigError(
                f"{label}: {owner.results} is damaged (wandb_run_id={wandb_id!r:.60} is "
                "not an id wandb takes); restore it, or set it to null to continue in a new wandb run"
            )
    if why:
        raise ConfigError(
            f"{label}: {owner.results} is damaged ({why}), so the training time so far is unknown; "
            f"restore it, or delete it to resume with train_seconds counted from 0"
        )


def rebuild_config(cfg: DictConfig, owner: RunDir, checkpoint: Path, calc) -> DictConfig:
    """The config ``resume=`` continues with: the project's, with the run's values (see the module's doc)."""
    label = f"resume={cfg.resume}"
    saved = read_saved_config(owner, label)
    check_results(owner, label)
    schema = OmegaConf.to_container(compose_project(saved_choices(owner, label)), resolve=False)
    try:
        resumed = OmegaConf.create(take_values(schema, saved))
    except ConfigError as e:
        raise ConfigError(f"{label}: {owner.config}: {e}") from None
    resumed.resume = str(checkpoint)
    check_against_checkpoint(resumed, calc, label, checkpoint)
    return resumed


def effective_config(cfg: DictConfig, overrides: list[str], multirun: bool) -> DictConfig:
    """The config this invocation runs: the composed one, or -- for resume= -- the config of the run it
    continues, rebuilt from the project's configs with the values of its config.yaml and checked against its
    checkpoint (training/resume.py); only trainer.max_steps may change, to train for longer."""
    if cfg.resume is None:
        return cfg
    if multirun:
        raise ConfigError("resume= continues one run; it cannot be part of a multirun (drop -m)")
    if not str(cfg.resume).strip():
        raise ConfigError("resume= is empty; give the run directory to continue, or one of its .ckpt files")
    try:
        checkpoint = resume_target(cfg.resume)
    except RunDirError as e:
        folder = Path(str(cfg.resume)).expanduser()
        run = RunDir(folder.parent)
        inside = folder.name == run.checkpoints.name and folder.is_dir() and run.config.is_file()
        raise ConfigError(f"{e}; the run is the folder above it: resume={run.path}" if inside else str(e)) from None
    owner = RunDir.of_checkpoint(checkpoint)
    if owner is None or not owner.config.exists():
        raise ConfigError(
            f"resume={cfg.resume}: {checkpoint} is not inside a run directory with its config.yaml, "
            "so the run's config is unknown"
        )
    changed = [o for o in overrides if not o.startswith(("resume=", "trainer.max_steps=", "model.attention="))]
    if changed:
        raise ConfigError(
            f"resume= continues a run with its own config; drop {' '.join(changed)} (only trainer.max_steps may change)"
        )
    from model.checkpoint import CheckpointError, load_calculator

    try:
        calc = load_calculator(checkpoint)  # a missing, corrupt or foreign checkpoint is one clear line, here
    except CheckpointError as e:
        raise ConfigError(f"resume={cfg.resume}: {e}") from None
    resumed = rebuild_config(cfg, owner, checkpoint, calc)  # values from the run, code only from the project
    given = cfg.model.get("attention") if any(o.startswith("model.attention=") for o in overrides) else None
    own_block_again(resumed, given, checkpoint, f"resume={cfg.resume}")
    if any(o.startswith("trainer.max_steps=") for o in overrides):
        resumed.trainer.max_steps = cfg.trainer.max_steps
    return resumed


def own_block_again(resumed: DictConfig, given: str | None, checkpoint: Path, label: str) -> None:
    """A run trained with a learner's block (model.attention=) continues with it only when the command line names
    it again -- the run directory names code, which is never taken from it -- and its file is the one trained
    (the checkpoint's sha256: model/build.py compares it as it loads the block)."""
    from model.checkpoint import read_checkpoint

    trained = resumed.model.get("attention")
    if trained is None and given is None:
        return
    if trained is None:
        raise ConfigError(f"{label}: the run was trained with the lesson's block; drop model.attention={given}")
    if given != trained:
        raise ConfigError(
            f"{label}: the run was trained with your block model.attention={trained}; a run directory is data, never "
            f"code, so give it again on the command line: model.attention={trained}"
        )
    sha = read_checkpoint(checkpoint)[1]["hyper_parameters"]["model"].get("attention_sha256")
    with open_dict(resumed):
        resumed.model.attention_sha256 = sha
