"""Experiment loggers: wandb named and grouped for the run, online only when it can work, and quiet.

wandb is offline by default (no account, no network). Online logging is tried only after wandb has verified its API
key with its server within a few seconds; otherwise one warning line and the run logs offline.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings

from omegaconf import DictConfig, OmegaConf, open_dict

from training.config import ConfigError, build

# logger.wandb's settings (WandbLogger's arguments) -> the wandb.Settings field wandb checks each one as. wandb
# checks them only at its first use, once the run has begun; check_wandb asks wandb.Settings before anything starts
WANDB_SETTINGS = {
    "project": "project",
    "name": "run_name",
    "group": "run_group",
    "tags": "run_tags",
    "id": "run_id",  # these two are set by resume= (the run's own wandb id): a resumed run's config.yaml has them
    "resume": "resume",
    "entity": "entity",
    "notes": "run_notes",
    "job_type": "run_job_type",
}
# where Lightning's information lines (rank_zero_info) go: one of the two, whichever module was imported last
RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning_fabric.utilities.rank_zero")
WANDB_MODES = ("offline", "online", "disabled")
WANDB_LOGGER_SETTINGS = ("_target_", "save_dir", "mode", "log_model")  # WandbLogger's own (training/config.py, cli.py)


def wandb_problem(timeout: float = 3.0) -> str | None:
    """None if online wandb logging can work here, else why not, in one line: wandb's own check (``wandb.Api``) of
    its API key -- from WANDB_API_KEY, wandb's settings files or the netrc ($NETRC included) -- with its server
    (WANDB_BASE_URL or wandb's settings), given up after ``timeout`` seconds."""
    import wandb

    started = time.monotonic()
    try:
        wandb.Api(timeout=timeout)
    except wandb.errors.UsageError:  # wandb's "No API key configured"
        return "no wandb API key (run `wandb login` or set WANDB_API_KEY)"
    except Exception as e:  # noqa: BLE001 -- wandb's AuthenticationError or CommError, whatever it wraps
        said = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if time.monotonic() - started >= timeout:
            return f"no answer within {timeout:.0f}s ({said})"
        return said.replace("<no message>", "it refused the key, or is no wandb server")
    return None


def build_loggers(cfg: DictConfig, run_name: str, group: str | None, resume_id: str | None) -> list:
    """The configured Lightning loggers, with wandb named by the run's overrides, grouped by sweep, resumed by
    id, and offline when online cannot work (one warning line instead of a hang or a traceback)."""
    nodes = cfg.get("logger") or {}
    wandb_cfg = nodes.get("wandb")
    if wandb_cfg is not None:
        check_wandb(OmegaConf.to_container(wandb_cfg, resolve=True))
        quiet_wandb()  # before anything of wandb's starts: its process-wide settings are made once
        with open_dict(wandb_cfg):
            wandb_cfg.name = wandb_cfg.name or run_name
            wandb_cfg.group = wandb_cfg.group or group
            if resume_id:
                wandb_cfg.id, wandb_cfg.resume = resume_id, "allow"
        if wandb_cfg.mode == "online":
            problem = wandb_problem()
            if problem:
                print(
                    f"warning: wandb online logging is not possible: {problem}; logging offline instead "
                    "(upload later with `wandb sync`)",
                    file=sys.stderr,
                )
                wandb_cfg.mode = "offline"
    return [build(node, f"logger.{name}") for name, node in nodes.items() if node is not None]


def quiet_wandb() -> None:
    """wandb without its banner and warning lines in this process (errors still show), unless WANDB_SILENT says
    otherwise. wandb.setup's settings, its public route for a whole process: a run's own settings come too late for
    the line wandb prints while it reads wandb.init's arguments (Lightning's WandbLogger always passes
    anonymous=None, which wandb 0.31 warns has no effect). Only the first setup of a process sets its terminal; the
    environment is left as it was."""
    if "WANDB_SILENT" in os.environ:
        return
    import wandb

    wandb.setup(settings=wandb.Settings(silent=True))


def check_wandb(settings: dict) -> None:
    """logger.wandb's settings, checked by wandb's own rules before the run begins (one line): a project name with
    a '/', a tag that is not a string or longer than 64 characters, a setting of wandb.init the project does not
    pass on. wandb.Settings is wandb's public check of each value."""
    import wandb

    for key, value in settings.items():
        if key in WANDB_LOGGER_SETTINGS:
            continue
        if key not in WANDB_SETTINGS:
            supported = [*WANDB_SETTINGS, "mode", "log_model"]
            raise ConfigError(
                f"logger.wandb.{key} is a wandb setting this project does not support; the supported ones: "
                f"{', '.join(supported)}"
            )
        try:
            wandb.Settings(**{WANDB_SETTINGS[key]: value})
        except Exception as e:  # noqa: BLE001 -- wandb's UsageError, or pydantic's ValidationError with .errors()
            why = e.errors()[0]["msg"] if callable(getattr(e, "errors", None)) else str(e).strip().splitlines()[0]
            raise ConfigError(f"logger.wandb.{key}={value!r}: wandb refuses it: {why}") from None
    if settings.get("mode", "offline") not in WANDB_MODES:
        raise ConfigError(f"logger.wandb.mode={settings['mode']!r} is not allowed: use one of {', '.join(WANDB_MODES)}")
    if settings.get("log_model", False) not in (True, False, "all"):
        raise ConfigError(f"logger.wandb.log_model={settings['log_model']!r}: use true, false or all")


def wandb_loggers(loggers) -> list:
    """The WandbLoggers among a trainer's loggers."""
    if not loggers:  # python analyse.py has none, and imports no Lightning for them
        return []
    from lightning.pytorch.loggers import WandbLogger

    return [logger for logger in loggers if isinstance(logger, WandbLogger)]


def wandb_run_id(loggers) -> str | None:
    found = wandb_loggers(loggers)
    return found[0].experiment.id if found else None


def finish_wandb() -> None:
    """Close the wandb run (if any) so the next job of a multirun starts a fresh one."""
    if "wandb" in sys.modules:
        import wandb

        if wandb.run is not None:
            wandb.finish()


def quiet_known_noise(verbose: bool = False) -> None:
    """Lightning's lines once and plain (not also through Hydra's timestamped root handler); third-party
    chatter that says nothing about this run (an advert, a deprecation notice) dropped. Lightning's information
    lines (the hardware banner "GPU available: ...", "Restoring states from the checkpoint ...") only with
    ``verbose`` (``python train.py verbose=true``); its warnings and errors always."""
    lightning_log = logging.getLogger("lightning.pytorch")
    if not lightning_log.handlers:  # Lightning adds its own only when the root logger has none
        plain = logging.StreamHandler()
        plain.setFormatter(logging.Formatter("%(message)s"))
        lightning_log.addHandler(plain)
    lightning_log.setLevel(logging.INFO)
    # importing Lightning resets its top loggers' levels, never these
    for name in RANK_ZERO_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
    lightning_log.propagate = False
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
    # a run directory holds only this run's checkpoints (storage/rundir.py); resuming finds them there by design
    warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
    # the litlogger advert is logged here; a filter on the logger that logs it holds for every handler
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(lambda r: "litlogger" not in r.getMessage())
