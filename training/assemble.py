"""Every object of a run, built from its composed config: what train.py trains, and what the benchmark and the
tests build in-process from the same config."""

from __future__ import annotations

import signal
import threading

from omegaconf import DictConfig

from training.config import ConfigError, build, check, distributed, not_joined
from training.loggers import build_loggers
from training.threads import use_threads


def build_objects(cfg: DictConfig) -> tuple:
    """The run's data, model, analysis and callbacks, each checking its own settings (a ConfigError). Built once
    more by train.py's command-line check before Hydra starts (training/cli.py), so a value one of them refuses is
    refused before anything is written: they write nothing as they are built."""
    from data.build import data_module, format_dict
    from data.mixing import width_of
    from training.compiling import CompiledStep
    from training.load import calculator_module
    from training.step_seeds import StepSeeds

    config = build(cfg.data, "data")
    try:
        datamodule = data_module(config)  # the research settings checked and given their pieces (data/build.py)
    except ValueError as e:
        raise ConfigError(f"data.{e}") from None
    # the longest problems the model can be asked: its trained width, plus place_offset digits for a place model
    try:
        longest = datamodule.fmt.at_width(datamodule.fmt.digits + cfg.model.get("place_offset", 0))
    except (TypeError, ValueError):  # place_offset=1.5, abc, -1e23: not a whole number >= 0, as the model says next
        longest = datamodule.fmt
    model_config = build(cfg.model, "model", vocab_size=datamodule.vocab_size, block_size=longest.seq_len)
    optim = build(cfg.optim, "optim")
    try:
        module = calculator_module(
            model_config.to_dict(), format_dict(datamodule.fmt), optim.to_dict(), model_config.attention
        )
        module.fmt = datamodule.fmt  # the same format with the data's draws (a short b): what the analyses ask
        if datamodule.data.mix is not None and datamodule.data.mix.mixed_widths:  # batches of every width
            module.widths = width_of  # their formats, from their lengths (data/mixing.py)
        compiled = CompiledStep(cfg.compile)  # the one setting of its own: compile (training/compiling.py)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    analysis = build(cfg.analysis, "analysis") if cfg.get("analysis") else None
    named = [(name, build(node, f"callbacks.{name}")) for name, node in (cfg.get("callbacks") or {}).items() if node]
    # every step's random draws seeded from (seed, step) for exact resume (training/step_seeds.py)
    callbacks = [callback for _, callback in named] + [StepSeeds(cfg.seed)] + ([compiled] if cfg.compile else [])
    # the objects that draw probe problems (the analysis, the attention-map callback) say which they would draw
    probe_checks = [("analysis", analysis.probes_for)] if analysis else []
    probe_checks += [(f"callbacks.{name}", c.probes_for) for name, c in named if hasattr(c, "probes_for")]
    for key, probes_for in probe_checks:
        try:
            probes_for(module)  # a bad probe is a config mistake, found before training
        except ValueError as e:
            raise ConfigError(f"{key}.{e}") from None
    return datamodule, module, analysis, callbacks


def build_trainer(cfg: DictConfig, callbacks: list, loggers: list):
    """The run's Trainer, refusing its own settings (a ConfigError). Built once more, with no logger, by train.py's
    command-line check before Hydra starts (training/cli.py), so a value only Lightning refuses writes nothing
    either: building it writes nothing (its callbacks make their folders when they first save)."""
    from training.callbacks import AtomicCheckpointIO, TheRunsSignals
    from training.optim import OldOptimizerStates

    # a run shorter than the validation interval still validates (and checkpoints) once, at its end
    cfg.trainer.val_check_interval = min(cfg.trainer.val_check_interval, cfg.trainer.max_steps)
    return build(
        cfg.trainer, "trainer", callbacks=[*callbacks, OldOptimizerStates(), TheRunsSignals()],  # that one last
        logger=loggers or False, plugins=AtomicCheckpointIO(),  # one plugin: Hydra would hand a list on as a ListConfig
        **distributed(cfg.trainer),  # trainer=ddp: a dead peer ends the run within DDP_TIMEOUT (training/config.py)
    )  # fmt: skip


def assemble(cfg: DictConfig, run_name: str = "", group: str | None = None, resume_id: str | None = None):
    """Every object of the run, each checking its own settings: a mistake is a ConfigError before any training."""
    check(cfg)  # the keys no object owns; each object checks its own arguments as it is built
    import lightning as L
    import torch

    use_threads(cfg.threads)  # training/threads.py: the project's rule, threads= its override
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule, module, analysis, callbacks = build_objects(cfg)
    loggers = build_loggers(cfg, run_name, group, resume_id)
    trainer = build_trainer(cfg, callbacks, loggers)
    if trainer.strategy.root_device.type == "cuda":  # never changes a CPU's arithmetic
        torch.set_float32_matmul_precision(cfg.matmul_precision)
    if trainer.world_size > 1:
        stoppable_while_waiting(trainer.strategy, not_joined(cfg.trainer))
    return datamodule, module, analysis, callbacks, loggers, trainer


def stoppable_while_waiting(strategy, not_joined: ConfigError) -> None:
    """Ctrl-C and SIGTERM end a process that waits for the others of its run (torch.distributed's rendezvous, which
    waits for every node up to DDP_TIMEOUT, training/config.py).

    That wait is in C++, where no Python signal handler runs until it returns: the project's handlers (a true status,
    a step finished first) would hold the signal until then. While it lasts the two signals do what they do by
    default -- end the process at once; nothing has been trained yet (a "running" record with no process behind it
    says so) -- and the handlers come back as soon as every process is there. A process left waiting longer than
    DDP_TIMEOUT (a node that never came) ends with ``not_joined``, one line, not torch's traceback."""
    import torch.distributed

    connect = strategy.setup_environment

    def wait() -> None:
        try:
            return connect()
        except torch.distributed.DistError:  # "Timed out after 121 seconds waiting for clients. 1/2 clients joined."
            raise not_joined from None

    def setup_environment() -> None:
        if threading.current_thread() is not threading.main_thread():
            return wait()
        previous = {signum: signal.signal(signum, signal.SIG_DFL) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            return wait()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    # Lightning has no hook before it connects the processes: its public method, wrapped on this strategy only
    strategy.setup_environment = setup_environment
