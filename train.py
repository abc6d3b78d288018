"""Train the calculator: python train.py [overrides]   (see README.md and configs/train.yaml).

config -> validate -> datamodule + module + callbacks + logger -> fit -> test -> analysis -> results.json
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path

os.environ.setdefault("WANDB_SILENT", "true")  # wandb's banner lines; errors still show

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.errors import InstantiationException  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig, OmegaConf, open_dict  # noqa: E402

from validate import ConfigError, check, register_resolvers, resume_target  # noqa: E402

register_resolvers()


def build(node: DictConfig, **kwargs):
    """hydra.utils.instantiate, with a bad value turned into a one-line ConfigError."""
    try:
        return hydra.utils.instantiate(node, **kwargs)
    except InstantiationException as e:
        cause = e.__cause__ or e
        if isinstance(cause, (ValueError, TypeError)):
            raise ConfigError(str(cause).splitlines()[0]) from None
        raise


def effective_config(cfg: DictConfig, hydra_cfg) -> DictConfig:
    """The config this invocation runs: the composed one, or -- for resume= -- the saved config of the run
    it continues (only trainer.max_steps may change, to train for longer)."""
    if cfg.resume is None:
        return cfg
    if hydra_cfg.mode == RunMode.MULTIRUN:
        raise ConfigError("resume= continues one run; it cannot be part of a multirun (drop -m)")
    checkpoint = resume_target(cfg.resume)
    saved = checkpoint.parent.parent / "config.yaml"
    if not saved.exists():
        raise ConfigError(f"resume={cfg.resume}: {saved} is missing, so the run's config is unknown")
    changed = [o for o in hydra_cfg.overrides.task if not o.startswith(("resume=", "trainer.max_steps="))]
    if changed:
        raise ConfigError(f"resume= continues a run with its own config; drop {' '.join(changed)} "
                          "(only trainer.max_steps may change)")
    from model.checkpoint import CheckpointError, load_calculator

    try:
        load_calculator(checkpoint)  # a missing, corrupt or foreign checkpoint is one clear line, here
    except CheckpointError as e:
        raise ConfigError(f"resume={cfg.resume}: {e}") from None
    resumed = OmegaConf.load(saved)
    resumed.resume = str(checkpoint)
    if any(o.startswith("trainer.max_steps=") for o in hydra_cfg.overrides.task):
        resumed.trainer.max_steps = cfg.trainer.max_steps
    return resumed


def wandb_reachable(timeout: float = 3.0) -> str | None:
    """None if online wandb logging can work here, else why not -- decided within about 2 x timeout."""
    import socket
    import threading
    from urllib.parse import urlparse

    import wandb

    if not wandb.login(prompt=False, verify=False):
        return "no wandb API key (run `wandb login` or set WANDB_API_KEY)"
    url = urlparse(os.environ.get("WANDB_BASE_URL") or wandb.Settings().base_url)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
    except OSError as e:
        return f"cannot reach {url.hostname} ({e.strerror or e})"
    outcome: list = []

    def verify() -> None:
        try:
            wandb.login(prompt=False, verify=True)
            outcome.append(None)
        except Exception as e:  # a bad key, or the server refusing us
            outcome.append(f"wandb rejected the login ({type(e).__name__})")

    checker = threading.Thread(target=verify, daemon=True)  # daemon: a stuck check never holds up exit
    checker.start()
    checker.join(timeout)
    return outcome[0] if outcome else f"no answer from {url.hostname} within {timeout:.0f}s"


def prepare_logger_config(cfg: DictConfig, hydra_cfg, previous: dict) -> None:
    """wandb defaults: the run named by its overrides, grouped by sweep, resumed by id, offline when online
    cannot work (one warning line instead of a hang)."""
    wandb_cfg = (cfg.get("logger") or {}).get("wandb")
    if wandb_cfg is None:
        return
    if wandb_cfg.name is None:
        wandb_cfg.name = hydra_cfg.job.override_dirname or Path(hydra_cfg.runtime.output_dir).name
    if wandb_cfg.group is None and hydra_cfg.mode == RunMode.MULTIRUN:
        wandb_cfg.group = Path(hydra_cfg.sweep.dir).name
    if previous.get("wandb_run_id"):
        with open_dict(wandb_cfg):
            wandb_cfg.id, wandb_cfg.resume = previous["wandb_run_id"], "allow"
    if wandb_cfg.mode == "online":
        problem = wandb_reachable()
        if problem:
            print(f"warning: wandb online logging is not possible: {problem}; logging offline instead "
                  "(upload later with `wandb sync`)", file=sys.stderr)
            wandb_cfg.mode = "offline"


def build_parts(cfg: DictConfig, run_dir: Path):
    """Every object of the run, validated before anything is trained or written."""
    from analysis.maps import default_probes, probe_sequences
    from model.module import CalculatorModule
    from run_control import FiniteLossGuard, GracefulStop

    datamodule = build(cfg.data)
    fmt = datamodule.fmt
    model_config = build(cfg.model, vocab_size=datamodule.vocab_size, block_size=fmt.seq_len)
    module = CalculatorModule(model=model_config.to_dict(), fmt=fmt.to_dict(),
                              optim=OmegaConf.to_container(cfg.optim, resolve=True))
    if cfg.analysis.probes is None:  # chosen for the task; the callbacks read the same list
        cfg.analysis.probes = default_probes(fmt)
    try:
        probe_sequences(module, list(cfg.analysis.probes))
    except ValueError as e:
        raise ConfigError(f"analysis.probes: {e}") from None
    checkpoints = run_dir / "checkpoints"
    callbacks = [build(c) for c in (cfg.get("callbacks") or {}).values() if c is not None]
    stopper = GracefulStop(checkpoints)
    callbacks += [stopper, FiniteLossGuard(checkpoints)]
    loggers = [build(c) for c in (cfg.get("logger") or {}).values() if c is not None]
    trainer = build(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    return datamodule, module, trainer, stopper


def quiet_known_noise() -> None:
    """Drop third-party chatter that says nothing about this run (an advert, two deprecation notices)."""
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
    warnings.filterwarnings("ignore", message=r".*anonymous setting has no effect")
    for source in (logging.getLogger(), logging.getLogger("lightning.pytorch")):  # Hydra's handlers and Lightning's
        for handler in source.handlers:
            handler.addFilter(lambda record: "litlogger" not in record.getMessage())


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


class Interrupted(Exception):
    """Training stopped on Ctrl-C / SIGTERM after saving a checkpoint."""


def run(cfg: DictConfig, hydra_cfg, run_dir: Path) -> dict:
    started = time.perf_counter()
    check(cfg)  # every value, before anything heavy is imported or anything is written
    # a run shorter than the validation interval still validates (and checkpoints) once, at its end
    cfg.trainer.val_check_interval = min(cfg.trainer.val_check_interval, cfg.trainer.max_steps)
    previous_path = run_dir / "results.json"
    previous = json.loads(previous_path.read_text()) if cfg.resume and previous_path.exists() else {}

    import lightning as L
    import torch

    from analysis.callbacks import AttentionMaps
    from analysis.maps import wandb_loggers
    from analysis.report import analyse_heads

    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    prepare_logger_config(cfg, hydra_cfg, previous)
    try:
        datamodule, module, trainer, stopper = build_parts(cfg, run_dir)
    except ValueError as e:  # the objects' own checks (d_model % n_heads, operand digits, ...)
        raise ConfigError(str(e).splitlines()[0]) from None
    main_process = trainer.is_global_zero
    if main_process:
        datamodule.save_tokenizer(run_dir)
        if not cfg.resume:
            OmegaConf.save(cfg, run_dir / "config.yaml", resolve=True)
        for logger in trainer.loggers:
            logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    fit_started = time.perf_counter()
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.resume)
    except SystemExit:  # Lightning's own stop after SIGTERM, once our callback has saved the checkpoint
        if stopper.saved is None:
            raise
    train_seconds = previous.get("train_seconds", 0.0) + time.perf_counter() - fit_started
    if stopper.saved is not None:
        wandb_ids = [logger.experiment.id for logger in wandb_loggers(trainer.loggers)]
        if main_process:
            write_json(run_dir / "results.json", {
                "status": "interrupted", "step": trainer.global_step, "checkpoint": str(stopper.saved),
                "train_seconds": round(train_seconds, 2), "wandb_run_id": wandb_ids[0] if wandb_ids else None,
                "resume": f"python train.py resume={run_dir}"})
        raise Interrupted(f"stopped at step {trainer.global_step}; checkpoint saved to {stopper.saved}; "
                          f"continue with: python train.py resume={run_dir}")

    history = list(module.val_history)  # now: testing loads the best checkpoint, and with it an older history
    checkpoint = trainer.checkpoint_callback
    best = checkpoint.best_model_path if checkpoint and checkpoint.best_model_path else None
    test = trainer.test(module, datamodule=datamodule, ckpt_path=best, verbose=False)[0]
    if not main_process:
        return {}

    net, fmt = module.net, module.fmt
    steps = trainer.global_step
    tokens = steps * datamodule.batch_size * trainer.world_size * (fmt.seq_len - 1)
    write_json(run_dir / "history.json", {"val": history})
    results = {
        "status": "ok",
        "test_exact_match": test["test/exact_match"],
        "test_digit_accuracy": test["test/digit_accuracy"],
        "test_loss": test["test/loss"],
        "val_exact_match": float(checkpoint.best_model_score) if best else None,
        "n_test": len(datamodule.held_out_set("test")),
        "n_params": net.n_params,
        "attention_params": sum(p.numel() for b in net.blocks for p in b.attn.parameters()),
        "d_model": net.cfg.d_model,
        "n_heads": net.cfg.n_heads,
        "n_kv_heads": net.cfg.n_kv_heads or net.cfg.n_heads,
        "head_dim": net.cfg.d_model // net.cfg.n_heads,
        "n_layers": net.cfg.n_layers,
        "data": fmt.to_dict(),
        "seed": cfg.seed,
        "steps": steps,
        "processes": trainer.world_size,
        "train_seconds": round(train_seconds, 2),
        "tokens_per_second": round(tokens / train_seconds),
        "checkpoint": best,
        "resumed_from": cfg.resume,
        "run_dir": str(run_dir),
    }
    maps = [c for c in trainer.callbacks if isinstance(c, AttentionMaps)]
    if maps:
        results["maps_seconds"] = round(maps[0].seconds, 2)  # drawing attention maps during training
    if cfg.analysis.enabled:
        analysis_started = time.perf_counter()
        problems = datamodule.held_out_set("test")[:cfg.analysis.n_problems]
        results |= analyse_heads(module, problems, run_dir, list(cfg.analysis.probes), trainer.loggers,
                                 tuple(cfg.analysis.ablation), cfg.analysis.prune, cfg.analysis.tolerance)
        results["analysis_seconds"] = round(time.perf_counter() - analysis_started, 2)
    results["total_seconds"] = round(time.perf_counter() - started, 2)
    return results


def finish_loggers() -> None:
    """Close the wandb run (if any) so the next job of a multirun starts a fresh one."""
    if "wandb" in sys.modules:
        import wandb

        if wandb.run is not None:
            wandb.finish()


def fail(run_dir: Path, message: str, status: str = "failed") -> None:
    print(f"error: {message}" if status == "failed" else message, file=sys.stderr)
    results = run_dir / "results.json"
    if status == "failed" and not (results.exists() and "interrupted" in results.read_text()):
        write_json(results, {"status": status, "error": message})  # never overwrite a resumable run's state


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    quiet_known_noise()
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    in_sweep = hydra_cfg.mode == RunMode.MULTIRUN
    try:
        results = run(effective_config(cfg, hydra_cfg), hydra_cfg, run_dir)
    except Interrupted as e:
        fail(run_dir, f"interrupted: {e}", status="interrupted")
        sys.exit(128 + signal.SIGINT)
    except KeyboardInterrupt:
        fail(run_dir, "interrupted before training started or after it ended; nothing to resume", "interrupted")
        sys.exit(128 + signal.SIGINT)
    except Exception as e:
        from run_control import NonFiniteLossError

        expected = isinstance(e, (ConfigError, NonFiniteLossError))
        if not (expected or in_sweep):
            raise  # a bug, not a bad value: the traceback is what a developer needs
        message = str(e) if expected else f"{type(e).__name__}: {e}"
        if not expected:  # keep the traceback in the job's directory, not on the terminal
            (run_dir / "error.log").write_text(traceback.format_exc())
            message += f" (traceback in {run_dir / 'error.log'})"
        fail(run_dir, message)
        if in_sweep:
            return  # fail this job alone; the sweep goes on and its summary lists the failure
        sys.exit(2 if isinstance(e, ConfigError) else 3)
    finally:
        finish_loggers()
    if not results:  # a non-zero rank of a multi-process run: rank 0 reports
        return
    from analysis.summary import print_summary

    write_json(run_dir / "results.json", results)
    print_summary(results)
    print(f"test exact-match {results['test_exact_match']:.4%} on {results['n_test']} held-out problems, "
          f"{results['steps']} steps in {results['train_seconds']:.1f}s")
    print(f"run directory: {run_dir}")


if __name__ == "__main__":
    main()
