"""The command line, checked before Hydra starts: a typo, a value out of range, a ``resume=`` that is not a run to
continue or a used run directory is one line, and neither the project nor Hydra writes anything (no .hydra/ into
someone else's run, no .hydra-resume/ into a folder that is not a run, no empty run directory left behind).

Hydra's own errors for these are several lines of advice that does not fit this project (``+model.n_head=8``
"appends" a key that nothing reads); here they become ``error: model.n_head is not a setting; did you mean
model.n_heads?``. The values are checked by the rules of training/config.py and by the objects that own them,
built here once as the run will build them (training/assemble.py: build_objects).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import logging
import re
import sys
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict

from storage.rundir import RunDir, RunDirError, SweepDir, hydra_override
from training.assemble import build_objects, build_trainer
from training.config import ConfigError, check
from training.loggers import RANK_ZERO_LOGGERS, check_wandb
from training.resume import compose_train_config, effective_config
from training.settings import did_you_mean
from training.signals import a_worker_process

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
HYDRA_FLAGS_WE_CHECK = ("-m", "--multirun")
NEEDED_GROUPS = ("model", "data", "optim", "trainer")  # a run cannot be built without one of each
OPTIONAL_GROUPS = ("analysis", "logger", "callbacks", "position", "experiment")  # ~group switches it off
OFF_BY_DEFAULT = ("position", "experiment")  # none unless chosen (configs/train.yaml)
CODE_KEYS = ("_target_", "_args_", "_partial_", "_recursive_", "_convert_")  # what Hydra instantiates
PLACEMENT_KEYS = ("run_dir", "save_dir", "default_root_dir")  # where the run's files go: its run directory


def with_run_dir(cfg: DictConfig, run_dir) -> DictConfig:
    """Give a composed config its run directory, as @hydra.main does, so ``${hydra:...}`` resolves (for building a
    run's objects in-process: the benchmark and the tests)."""
    from hydra.core.hydra_config import HydraConfig

    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(run_dir)
    HydraConfig.instance().set_config(cfg)
    return cfg


def _parse(texts: list[str]) -> list:
    """Hydra's overrides, or one line naming the argument its grammar cannot read and how to write it."""
    parser = OverridesParser.create()
    for i, text in enumerate(texts):
        try:
            parser.parse_overrides([text])
        except Exception as e:  # noqa: BLE001 -- Hydra's parse errors
            lines = [line for line in str(e).strip().splitlines() if not line.startswith(("Error parsing", "See "))]
            # the grammar's own token list ("expecting {':', BRACKET_OPEN, ...}") says nothing to a user
            why = re.sub(r" expecting (\{[^}]*\}|\S+)", "", (lines or [type(e).__name__])[0].strip())
            raise ConfigError(_unreadable(texts, i, why)) from None
    return parser.parse_overrides(texts)


def _unreadable(texts: list[str], i: int, why: str) -> str:
    """A space inside an override (``model.n_heads=1, 2``, ``seed= 3``) splits it into arguments that each fail:
    the pieces joined again, when that reads, are the way to write it."""
    start = i
    while start > 0 and "=" not in texts[start]:  # back to the piece holding the key
        start -= 1
    end = i + 1
    while end < len(texts) and "=" not in texts[end]:  # on over the pieces that hold no key of their own
        end += 1
    pieces = texts[start:end]
    joined = "".join(pieces)
    if len(pieces) > 1:
        try:
            OverridesParser.create().parse_overrides([joined])
        except Exception:  # noqa: BLE001 -- not a split override after all
            pass
        else:
            return (
                f"{' '.join(pieces)}: a space splits one override into {len(pieces)} arguments; write {joined} "
                "(no spaces; quote a value that holds one: key='a b')"
            )
    if "=" not in texts[i]:
        return f"{texts[i]}: not an override; write key=value (see the keys with  python train.py --cfg job)"
    return (
        f"{texts[i]}: Hydra cannot read this override ({why}); write key=value, a sweep as key=a,b with no "
        "spaces, and quote a value holding spaces or ${[](),:} (key='a b')"
    )


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
            known = did_you_mean(leaf, node.keys(), f"{parent}." if parent else "")
            known = (_with_its_group(key, base) or known) if not parent else known
            return f"{key} is not a setting{known}; see them all with  python train.py --cfg job"
        groups = [p.name for p in CONFIGS.iterdir() if p.is_dir()]
        return f"{key} is not a setting or config group{did_you_mean(key, list(base.keys()) + groups)}"
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
            f"{group}={option} is not an option of {group}{did_you_mean(option, options)}; "
            f"choose one of {', '.join(options)}"
        )
    return message.strip().splitlines()[0]


def _with_its_group(key: str, base: DictConfig) -> str:
    """A setting given without its group (``n_heads=8``): the full keys whose last part is it (``model.n_heads``), or
    holds it as a word (``heads=8``), or is nearest to it, when at most three do; else ""."""
    full = {}  # last part -> the keys ending in it
    for dotted in _all_keys(base):
        if "." in dotted:
            full.setdefault(dotted.rpartition(".")[2], []).append(dotted)
    if key in full:
        names = [key]
    else:  # a word of a setting's name (heads: n_heads) before a name spelt like it (threads)
        names = [leaf for leaf in full if any(w == key or len(key) > 3 and w.startswith(key) for w in leaf.split("_"))]
        names = names or difflib.get_close_matches(key, list(full) + list(base.keys()), n=1, cutoff=0.6)
    keys = [k for name in names for k in ([name] if name in base else []) + full.get(name, [])]
    return f" (did you mean {' or '.join(keys)}?)" if 0 < len(keys) <= 3 else ""


def _first_values(overrides) -> list[str]:
    """Sweep overrides (a=1,2) -> their first value, so one composition checks every key of a multirun."""
    return _one_job(overrides, {})


def _one_job(overrides, picked: dict[int, str]) -> list[str]:
    """The overrides of one job of a multirun: the value ``picked`` for a sweep override (by its index), else its
    first."""
    single = []
    for i, o in enumerate(overrides):
        if o.is_sweep_override():
            value = picked.get(i, next(iter(o.sweep_string_iterator())))
            single.append(f"{o.get_key_element()}={value}")
        else:
            single.append(o.input_line)
    return single


def _every_swept_value(overrides) -> list[list[str]]:
    """One job per value of each sweep override after its first (the others at their first): so every option and
    interpolation a multirun sweeps is composed before any job runs (Hydra would stop the sweep at that job)."""
    return [
        _one_job(overrides, {i: value})
        for i, o in enumerate(overrides)
        if o.is_sweep_override()
        for value in list(o.sweep_string_iterator())[1:]
    ]


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


def _composed(overrides, job: list[str]) -> DictConfig:
    """One job's config, composed, with its keys and options, its additions and its interpolations checked."""
    try:
        cfg = compose_train_config(job)
    except Exception as e:  # noqa: BLE001 -- composition errors of every kind
        raise ConfigError(_explain(str(e), compose_train_config([]))) from None
    _check_resolves(cfg)
    return cfg


def _check_values(cfg: DictConfig) -> None:
    """The values: the rules of the keys no object owns (training/config.py: ranges, devices, sizes), then each
    object's own, by building the data, the model, the analysis, the callbacks and the trainer as the run will
    (they write nothing; the trainer quietly, with no logger), and wandb's names by wandb's rules. The loggers are
    built in the run only. A resumed run's config is the run's own, checked by :func:`_check_resume`."""
    check(cfg)
    if cfg.resume is None:
        job = with_run_dir(copy.deepcopy(cfg), cfg.hydra.run.dir)  # ${hydra:runtime.output_dir}: where it writes
        _, _, _, callbacks = build_objects(job)
        with _lightning_quiet():  # its hardware banner is the run's to print (verbose=true), not the check's
            build_trainer(job, callbacks, loggers=[])
        wandb = (cfg.get("logger") or {}).get("wandb")
        if wandb is not None:
            check_wandb(OmegaConf.to_container(wandb, resolve=True))


@contextlib.contextmanager
def _lightning_quiet():
    """Lightning's information lines (rank_zero_info) held back for the block; its warnings still show."""
    loggers = [logging.getLogger(name) for name in RANK_ZERO_LOGGERS]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(max(log.level, logging.WARNING))
    try:
        yield
    finally:
        for log, level in zip(loggers, levels, strict=True):
            log.setLevel(level)


def _check_resume(cfg: DictConfig, overrides, multirun: bool) -> None:
    """resume= names a run that can be continued, with the run's own config: checked in full here, before Hydra is
    given its directory (Hydra writes .hydra-resume/ into whatever folder resume= names, and the run's lock would
    follow), so a folder that is not a run -- /etc, an empty one, a sweep, a run's checkpoints/ -- stays untouched."""
    if multirun:
        raise ConfigError("resume= continues one run; it cannot be part of a multirun (drop -m)")
    task = [o.input_line for o in overrides if not o.key_or_group.startswith("hydra")]
    effective_config(cfg, task, multirun=False)  # the same checks the run makes again as it starts


def check_command_line(argv: list[str], claim: bool = False) -> RunDir | SweepDir | None:
    """Exit 2 with one line for an override Hydra cannot read or apply, a value a check refuses, a ``resume=`` that
    is not a run to continue, or a run directory already used.

    With ``claim`` (train.py), also a run or sweep directory in use by another process, or a sweep directory used
    already; else the directory is claimed for this process -- before Hydra writes its files there, so a refused
    command never touches another run's .hydra/ -- and returned (the caller releases it). It is added to ``argv``
    (hydra.run.dir= / hydra.sweep.dir=) when Hydra would otherwise pick it again, from the clock."""
    if any(a.startswith("-") and a not in HYDRA_FLAGS_WE_CHECK for a in argv):
        return None  # --help, --cfg, -cp ...: Hydra's own business
    if a_worker_process():
        return None  # a DDP worker re-running the command: rank 0 has checked it
    multirun = any(a in HYDRA_FLAGS_WE_CHECK for a in argv)
    texts = [a for a in argv if a not in HYDRA_FLAGS_WE_CHECK]
    try:
        overrides = _parse(texts)
        _check_deletions(overrides)
        _check_placements(overrides)
        cfg = _composed(overrides, _first_values(overrides))
        if cfg.resume is not None:  # before any directory is claimed: a refused resume= writes nothing anywhere
            _check_resume(cfg, overrides, multirun)
        if not multirun:
            _check_values(cfg)
        for job in _every_swept_value(overrides):  # a sweep's values are each its job's to check: one fails alone
            if _composed(overrides, job).resume is not None:  # -m resume=null,<run>: no job of a sweep resumes
                _check_resume(cfg, overrides, multirun)
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


def exit_status(argv: list[str]) -> int:
    """The command's exit status once Hydra is done: 0, or -- after a multirun none of whose jobs ended "ok" (each
    refused as it was built, or failed) -- EXIT_TRAINING. A sweep with some jobs ok exits 0: a failing setting fails
    alone, and the summary's last line counts it. Read from each job's record in the sweep directory (pinned in
    ``argv`` by :func:`check_command_line`), so whichever launcher ran the jobs, in whatever processes."""
    from training.failures import EXIT_TRAINING

    if not any(a in HYDRA_FLAGS_WE_CHECK for a in argv) or any(
        a.startswith("-") and a not in HYDRA_FLAGS_WE_CHECK for a in argv
    ):
        return 0  # one run (its failures exit as they happen), or Hydra's own --help, --cfg ...
    if a_worker_process():
        return 0  # the first process of a multi-process job speaks for the sweep
    overrides = OverridesParser.create().parse_overrides([a for a in argv if a not in HYDRA_FLAGS_WE_CHECK])
    where = [o.value() for o in overrides if o.key_or_group == "hydra.sweep.dir"]
    none_ok = where and not any(job.status == "ok" for job in SweepDir(where[-1]).jobs())
    return EXIT_TRAINING if none_ok else 0
