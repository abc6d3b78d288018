"""Train the calculator: python train.py [overrides]   (see README.md and configs/train.yaml).

config -> validate -> datamodule + module + callbacks + logger -> fit -> test -> results.json
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

os.environ.setdefault("WANDB_SILENT", "true")  # wandb's banner lines; errors still show

import hydra  # noqa: E402
import lightning as L  # noqa: E402
import torch  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.errors import InstantiationException  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from analysis.maps import probe_sequences  # noqa: E402
from analysis.report import analyse_heads  # noqa: E402
from analysis.summary import print_summary  # noqa: E402
from model.module import CalculatorModule  # noqa: E402


class ConfigError(ValueError):
    """A user-facing configuration mistake: reported as one line, never a traceback."""


def build(node: DictConfig, **kwargs):
    """hydra.utils.instantiate, with a bad value turned into a one-line ConfigError."""
    try:
        return hydra.utils.instantiate(node, **kwargs)
    except InstantiationException as e:
        cause = e.__cause__ or e
        if isinstance(cause, (ValueError, TypeError)):
            raise ConfigError(str(cause).splitlines()[0]) from None
        raise


def name_wandb_run(cfg: DictConfig, hydra_cfg) -> None:
    """Default wandb names: the run after its overrides, the group after the sweep."""
    wandb_cfg = (cfg.get("logger") or {}).get("wandb")
    if wandb_cfg is None:
        return
    if wandb_cfg.name is None:
        wandb_cfg.name = hydra_cfg.job.override_dirname or Path(hydra_cfg.runtime.output_dir).name
    if wandb_cfg.group is None and hydra_cfg.mode == RunMode.MULTIRUN:
        wandb_cfg.group = Path(hydra_cfg.sweep.dir).name


def build_parts(cfg: DictConfig):
    """Every object of the run, validated before anything is trained or written."""
    if cfg.resume is not None:
        raise ConfigError("resume is not supported yet; start a new run (drop the resume=... override)")
    datamodule = build(cfg.data)
    fmt = datamodule.fmt
    model_config = build(cfg.model, vocab_size=datamodule.vocab_size, block_size=fmt.seq_len)
    try:
        module = CalculatorModule(model=model_config.to_dict(), fmt=fmt.to_dict(),
                                  optim=OmegaConf.to_container(cfg.optim, resolve=True))
    except (ValueError, TypeError) as e:
        raise ConfigError(str(e)) from None
    if not isinstance(cfg.trainer.max_steps, int) or cfg.trainer.max_steps < 1:
        raise ConfigError(f"trainer.max_steps={cfg.trainer.max_steps!r}: must be a whole number >= 1")
    validate_analysis(cfg.analysis, module)
    callbacks = [build(c) for c in (cfg.get("callbacks") or {}).values() if c is not None]
    loggers = [build(c) for c in (cfg.get("logger") or {}).values() if c is not None]
    trainer = build(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    return datamodule, module, trainer


def quiet_known_noise() -> None:
    """Drop third-party chatter that says nothing about this run (an advert, two deprecation notices)."""
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
    warnings.filterwarnings("ignore", message=r".*anonymous setting has no effect")
    for handler in logging.getLogger("lightning.pytorch").handlers:
        handler.addFilter(lambda record: "litlogger" not in record.getMessage())


def validate_analysis(analysis: DictConfig, module: CalculatorModule) -> None:
    unknown = set(analysis.ablation) - {"zero", "mean"}
    if unknown:
        raise ConfigError(f"analysis.ablation={list(analysis.ablation)}: use zero and/or mean")
    if analysis.n_problems is not None and (not isinstance(analysis.n_problems, int) or analysis.n_problems < 1):
        raise ConfigError(f"analysis.n_problems={analysis.n_problems!r}: a whole number >= 1, or null for all")
    if analysis.prune not in ("ranked", "greedy", None):
        raise ConfigError(f"analysis.prune={analysis.prune!r}: use ranked, greedy or null")
    if not 0 <= analysis.tolerance < 1:
        raise ConfigError(f"analysis.tolerance={analysis.tolerance!r}: must be in [0, 1)")
    if analysis.enabled and not analysis.probes:
        raise ConfigError("analysis.probes is empty: give at least one problem, e.g. analysis.probes=[456+789]")
    try:
        if analysis.probes:
            probe_sequences(module, list(analysis.probes))
    except ValueError as e:
        raise ConfigError(f"analysis.probes: {e}") from None


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def run(cfg: DictConfig, run_dir: Path) -> dict:
    started = time.perf_counter()
    if cfg.threads is not None:
        if not isinstance(cfg.threads, int) or cfg.threads < 1:
            raise ConfigError(f"threads={cfg.threads!r}: a whole number >= 1, or null for torch's default")
        torch.set_num_threads(cfg.threads)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule, module, trainer = build_parts(cfg)
    datamodule.save_tokenizer(run_dir)
    OmegaConf.save(cfg, run_dir / "config.yaml", resolve=True)
    for logger in trainer.loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    fit_started = time.perf_counter()
    trainer.fit(module, datamodule=datamodule)
    train_seconds = time.perf_counter() - fit_started

    checkpoint = trainer.checkpoint_callback
    best = checkpoint.best_model_path if checkpoint and checkpoint.best_model_path else None
    test = trainer.test(module, datamodule=datamodule, ckpt_path=best, verbose=False)[0]

    net, fmt = module.net, module.fmt
    steps = trainer.global_step
    tokens = steps * datamodule.batch_size * (fmt.seq_len - 1)
    write_json(run_dir / "history.json", {"val": module.val_history})
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
        "train_seconds": round(train_seconds, 2),
        "tokens_per_second": round(tokens / train_seconds),
        "checkpoint": best,
        "run_dir": str(run_dir),
    }
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


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    quiet_known_noise()
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    in_sweep = hydra_cfg.mode == RunMode.MULTIRUN
    name_wandb_run(cfg, hydra_cfg)
    try:
        results = run(cfg, run_dir)
    except Exception as e:
        if not (isinstance(e, ConfigError) or in_sweep):
            raise  # a bug, not a bad value: the traceback is what a developer needs
        message = str(e) if isinstance(e, ConfigError) else f"{type(e).__name__}: {e}"
        if not isinstance(e, ConfigError):  # keep the traceback in the job's directory, not on the terminal
            (run_dir / "error.log").write_text(traceback.format_exc())
            message += f" (traceback in {run_dir / 'error.log'})"
        print(f"error: {message}", file=sys.stderr)
        write_json(run_dir / "results.json", {"status": "failed", "error": message})
        if in_sweep:
            return  # fail this job alone; the sweep goes on and its summary lists the failure
        sys.exit(2)
    finally:
        finish_loggers()
    write_json(run_dir / "results.json", results)
    print_summary(results)
    print(f"test exact-match {results['test_exact_match']:.4%} on {results['n_test']} held-out problems, "
          f"{results['steps']} steps in {results['train_seconds']:.1f}s")
    print(f"run directory: {run_dir}")


if __name__ == "__main__":
    main()
