"""Train the calculator: python train.py [overrides]   (see README.md and configs/train.yaml).

compose -> build -> fit -> test -> analyse -> record. The run's life around it -- its directory, its status, what
Ctrl-C leaves behind, the exit code -- is training/run.py's.
"""

# ruff: noqa: E402 -- the clock starts before the imports, so the phases' "startup" counts them
import time

STARTED = time.perf_counter()

from training.signals import guard_command  # first: Ctrl-C while the imports below run is one line, not a traceback

if __name__ == "__main__":  # the command, not an import of it: an importer's own signal handlers stay as they were
    guard_command(" before the run began: nothing written")

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from analysis.html_report import write_run_report
from analysis.record import Recorder
from analysis.summary import print_summary
from storage.rundir import RunDir
from training.assemble import assemble
from training.cli import exit_status
from training.collector import exit_quickly
from training.config import register_resolvers
from training.loggers import quiet_known_noise
from training.resume import effective_config
from training.run import Run, next_steps, run_command, run_job


def train(cfg: DictConfig, run: Run, name: str, group: str | None) -> dict:
    """Train, test and analyse one calculator as ``cfg`` says; write results.json and report.html. Returns the
    results.json record ({} on the processes of a multi-process run other than the first)."""
    from analysis.callbacks import AttentionMaps
    from training.results import run_record, test_mistakes

    datamodule, module, analysis, callbacks, loggers, trainer = assemble(
        cfg, name, group, run.previous.get("wandb_run_id")
    )
    run.begin(trainer, callbacks, loggers, datamodule.tokenizer, module.net.cfg.attention)  # status "running"

    with run.phase("training"):
        trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.resume)

    with run.phase("test"):  # on the best weights (testing loads them, and with them an older history: keep ours)
        history = list(module.val_history)
        best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else None
        test = trainer.test(module, datamodule=datamodule, ckpt_path=best or None, verbose=False)[0]
        if not run.main_process:
            return {}
        module.to(trainer.strategy.root_device)  # Lightning hands the model back on the CPU; analyse where it trained
        run.dir.write_json(run.dir.history, {"val": history})
        run.results = run_record(module, trainer, datamodule, test, cfg, run.train_seconds, str(run.dir))

    with run.phase("analysis"):  # from here on the run is finished: a signal leaves it "ok"
        test_set = datamodule.held_out_set("test")
        found = module.test_wrong if trainer.world_size == 1 else None  # each process tested a share
        run.dir.write_json(run.dir.mistakes, test_mistakes(module, test_set, found=found))
        for maps in (c for c in callbacks if isinstance(c, AttentionMaps)):  # drawn during training
            run.results["maps_seconds"] = round(maps.seconds, 2)
        if analysis is not None and analysis.enabled:
            run.results |= analysis.run(module, test_set, run.dir, trainer.loggers)
        run.results["total_seconds"] = run.seconds

    with run.phase("report"):  # each phase from the analysis on ends with the record: the page reads it
        run.finished()
        page = write_run_report(run.dir.path)  # report.html: the run on one page, its model in the lab
        Recorder(run.dir, run.loggers).the_run(page, run.record())  # to wandb: the page, the summary, the files
    return run.results


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    quiet_known_noise(bool(cfg.get("verbose")))
    hydra_cfg = HydraConfig.get()
    run_dir, in_sweep = RunDir(hydra_cfg.runtime.output_dir), hydra_cfg.mode == RunMode.MULTIRUN
    group = hydra_cfg.sweep.dir.rstrip("/").rsplit("/", 1)[-1] if in_sweep else None
    name = hydra_cfg.job.override_dirname or run_dir.path.name

    def job() -> dict:
        config = effective_config(cfg, list(hydra_cfg.overrides.task), in_sweep)  # resume=: the run's own config
        return train(config, Run(config, run_dir, STARTED), name, group)

    results = run_job(job, run_dir, in_sweep, resuming=cfg.resume is not None)
    if results:
        print_summary(results, verbose=bool(cfg.get("verbose")))  # verbose: the researcher's table
        if not in_sweep:  # a sweep ends with its own page (analysis/hydra_callbacks.py)
            print(next_steps(results))


if __name__ == "__main__":
    register_resolvers()  # configs/train.yaml's ${run_dir:...}: Hydra composes it before main runs
    run_command(main)
    exit_quickly(exit_status(sys.argv[1:]))  # a sweep none of whose jobs ended ok exits 3 (training/cli.py)
