"""Train the calculator: python train.py [overrides]   (see README.md and configs/train.yaml).

compose -> check -> build (data, model, callbacks, loggers, trainer) -> fit -> test -> analyse -> results.json
"""

# ruff: noqa: E402 -- the clock starts before the imports, so the phases' "startup" counts them

from __future__ import annotations

import time

STARTED = time.perf_counter()

import atexit
import os
import sys
import threading

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from analysis.html_report import write_run_report
from analysis.summary import print_summary
from storage.rundir import RunDir, override
from training.assemble import assemble
from training.cli import check_command_line
from training.config import register_resolvers
from training.failures import Interrupted, handle_failure
from training.loggers import finish_wandb, quiet_known_noise, wandb_run_id
from training.resume import effective_config
from training.signals import Signalled, StopOnSignal, exit_code, signal_name

register_resolvers()
RUNS_STARTED: list[float] = []  # when each train() of this process began


def train(cfg: DictConfig, run_dir: RunDir, run_name: str, group: str | None) -> dict:
    """Train, test and analyse one calculator as ``cfg`` says, write results.json and report.html; returns the
    results.json record ({} on the processes of a multi-process run other than the first).

    A signal in any phase after setup leaves a true status and raises :class:`Interrupted` (see :func:`stopped`).
    """
    started = time.perf_counter()
    from analysis.callbacks import AttentionMaps
    from training.callbacks import GracefulStop
    from training.phases import Phases
    from training.results import run_record, test_mistakes

    # startup: the imports and the config, before the first run of this process (a sweep's later runs have none)
    phases = Phases(STARTED if not RUNS_STARTED else started, started)
    RUNS_STARTED.append(started)
    previous = run_dir.read_results() if cfg.resume else {}
    datamodule, module, analysis, callbacks, loggers, trainer = assemble(
        cfg, run_name, group, previous.get("wandb_run_id")
    )
    main_process = trainer.is_global_zero
    if main_process:
        run_dir.claim(resuming=cfg.resume is not None)
        run_dir.mark_running(cfg.resume, previous)
        datamodule.tokenizer.save(run_dir.tokenizer)
        if not cfg.resume:
            OmegaConf.save(cfg, run_dir.config, resolve=True)
        for logger in trainer.loggers:
            logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    phases.lap("build")  # data, model, trainer, loggers (wandb's start included)
    fit_started = time.perf_counter()
    stopper = next((c for c in callbacks if isinstance(c, GracefulStop)), None)
    phase, results = "training", {}
    try:
        try:
            trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.resume)
        except SystemExit:  # Lightning's own stop after SIGTERM, once our callback has saved the checkpoint
            if stopper is None or stopper.saved is None:
                raise
        except Signalled:  # a second signal in a step: stopped at once, unless the checkpoint was already saved
            if stopper is None or stopper.saved is None:
                raise
        train_seconds = previous.get("train_seconds", 0.0) + time.perf_counter() - fit_started
        phases.lap("training")
        if stopper is not None and stopper.saved is not None:
            if main_process:
                run_dir.mark_interrupted(trainer.global_step, stopper.saved, train_seconds, wandb_run_id(loggers))
            raise Interrupted(
                f"stopped at step {trainer.global_step}; checkpoint saved to {stopper.saved}; "
                f"continue with: {run_dir.resume_command}",
                stopper.signal,
            )

        phase = "test"
        history = list(module.val_history)  # now: testing loads the best checkpoint, and with it an older history
        checkpoint = trainer.checkpoint_callback
        best = checkpoint.best_model_path if checkpoint and checkpoint.best_model_path else None
        test = trainer.test(module, datamodule=datamodule, ckpt_path=best, verbose=False)[0]
        if not main_process:
            return {}
        module.to(trainer.strategy.root_device)  # Lightning hands the model back on the CPU; analyse where it trained
        test_set = datamodule.held_out_set("test")
        run_dir.write_json(run_dir.history, {"val": history})
        results = run_record(module, trainer, datamodule, test, cfg, train_seconds, str(run_dir))
        phases.lap("test")

        phase = "analysis"  # from here on the run is finished: a signal leaves it "ok"
        found = module.test_wrong if trainer.world_size == 1 else None  # each process tested a share
        run_dir.write_json(run_dir.mistakes, test_mistakes(module, test_set, found=found))
        for maps in (c for c in callbacks if isinstance(c, AttentionMaps)):
            results["maps_seconds"] = round(maps.seconds, 2)  # drawing attention maps during training
        if analysis is not None and analysis.enabled:
            results |= analysis.run(module, test_set, run_dir, trainer.loggers)
        results["total_seconds"] = round(time.perf_counter() - started, 2)
        phases.lap("analysis")
        results["phases"] = phases.seconds
        run_dir.write_results(results)
        phase = "report"
        if cfg.resume:  # the interrupted state is used up: running the resume command again must not retrain
            run_dir.interrupted_checkpoint.unlink(missing_ok=True)
        write_run_report(run_dir.path)  # report.html: the run on one page
        phases.lap("report")
        results["phases"] = phases.seconds
        run_dir.write_results(results)  # again, with the report's seconds (the page shows the record before them)
    except Signalled as stop:
        if not main_process:
            raise
        if phase == "analysis":
            results["total_seconds"] = round(time.perf_counter() - started, 2)
        train_seconds = previous.get("train_seconds", 0.0) + time.perf_counter() - fit_started
        raise stopped(stop.signum, phase, run_dir, cfg, trainer, loggers, stopper, results, train_seconds) from None
    return results


def stopped(signum, phase, run_dir, cfg, trainer, loggers, stopper, results, train_seconds) -> Interrupted:
    """Write the true status of a run that ``signum`` stopped at once in ``phase``; the line to end with.

    training (a second signal within one step): the step under way is not saved (its weights may be half
    updated); the run continues from interrupted.ckpt if there is one (a resumed run's), else from best.ckpt, else
    nothing. test: training had finished; no test results. analysis, report: the run is finished and recorded
    (status ok).
    """
    name, step = signal_name(signum), trainer.global_step
    if phase in ("training", "test"):
        if run_dir.interrupted_checkpoint.is_file():  # a resumed run's: continues it exactly
            checkpoint, resume = run_dir.interrupted_checkpoint, run_dir.resume_command
        elif run_dir.best_checkpoint.is_file():
            checkpoint = run_dir.best_checkpoint
            resume = f"python train.py {override('resume', checkpoint)}"
        else:
            checkpoint = resume = None
        run_dir.mark_interrupted(step, checkpoint, train_seconds, wandb_run_id(loggers), resume, phase)
        if phase == "training":
            again = "a second " if stopper is not None and stopper.signal is not None else ""
            said = f"{again}{name}: stopped at once in step {step}, whose weights were not saved"
        else:
            said = f"{name} during the test: training had finished (step {step}) but there are no test results"
        if checkpoint is None:
            return Interrupted(f"{said}; no checkpoint had been saved yet: nothing to resume, start again", signum)
        use = f"; or use these weights as they are: python calc.py --ckpt {checkpoint}" if phase == "test" else ""
        return Interrupted(f"{said}; continue from {checkpoint} with: {resume}{use}", signum)
    # the training and the test finished: the record is true; the interrupted state (a resumed run's) is used up
    run_dir.write_results({**results, "interrupted_phase": phase})
    if cfg.resume:
        run_dir.interrupted_checkpoint.unlink(missing_ok=True)
    facts = f"results in {run_dir.results} (status ok, test exact-match {results.get('test_exact_match', 0):.4f})"
    if phase == "analysis":
        return Interrupted(
            f"{name} during the end-of-run analysis: the run is finished, {facts}; the analysis did not finish: "
            f"run it again with: python analyse.py {run_dir.path}  (the model is usable as it is: "
            f"python calc.py --ckpt {run_dir.path})",
            signum,
        )
    return Interrupted(
        f"{name} while writing report.html: the run is finished, {facts}; "
        f"write the page with: python -m analysis.html_report {run_dir.path}",
        signum,
    )


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    quiet_known_noise(bool(cfg.get("verbose")))
    hydra_cfg = HydraConfig.get()
    run_dir = RunDir(hydra_cfg.runtime.output_dir)
    in_sweep = hydra_cfg.mode == RunMode.MULTIRUN
    group = hydra_cfg.sweep.dir.rstrip("/").rsplit("/", 1)[-1] if in_sweep else None
    try:
        cfg = effective_config(cfg, list(hydra_cfg.overrides.task), in_sweep)
        results = train(cfg, run_dir, hydra_cfg.job.override_dirname or run_dir.path.name, group)
    except (Exception, KeyboardInterrupt, Signalled) as error:  # noqa: BLE001 -- handle_failure re-raises bugs
        code = handle_failure(error, run_dir, in_sweep, started=run_dir.owns_lock)
        if code is not None:
            sys.exit(code)
        return
    finally:
        try:
            finish_wandb()
        finally:  # a signal while wandb closes still leaves no lock behind
            run_dir.release()
    if results:
        print_summary(results)
        if not in_sweep:  # a sweep ends with its own page (analysis/hydra_callbacks.py)
            print(next_steps(results))


SAMPLE_PROBLEMS = "examples/problems.txt"  # 3-digit additions, for the default task


def next_steps(results: dict) -> str:
    """What to do with the run now: its page, and calc.py on it (with the sample problems file when it fits)."""
    run, fmt = results["run_dir"], results["data"]
    digits, op = int(fmt["digits"]), str(fmt["operators"])[0]
    example = f"{'1' * digits}{op}{'2' * max(1, digits - 1)}"
    lines = [
        "next:",
        f"  look     {run}/report.html   (open it in a browser: the run on one page)",
        f"  ask      python calc.py --ckpt {run} {example}",
    ]
    if "+" in str(fmt["operators"]) and digits >= 3:
        lines.append(f"  score    python calc.py --ckpt {run} --eval {SAMPLE_PROBLEMS}")
    return "\n".join(lines)


def run_command() -> None:
    # typos, used run directories and ones in use: one line, before Hydra writes anything; else the directory is ours
    args = sys.argv[1:]
    claimed = check_command_line(args, claim=True)
    sys.argv[1:] = args  # with the directory claimed, pinned
    try:
        main()
    finally:
        if claimed is not None:
            claimed.release()
            if isinstance(claimed, RunDir):
                claimed.discard_if_unused()  # a run that never began leaves no directory


def exit_without_teardown() -> None:
    """Exit 0 once everything is written: the atexit handlers run (wandb's, logging's) and the streams are flushed,
    but the interpreter does not tear down every module it imported (0.6-0.9 s after torch and Lightning, a
    sixteenth of the default run's whole command; docs/performance.md)."""
    # the interpreter's own first step at exit: threading's exit hooks (which tell thread-pool workers to stop --
    # torch.compile's, with compile=) and then a join of every non-daemon thread; joining first waits forever
    threading._shutdown()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    # Ctrl-C and SIGTERM, from here to the end: a line, a true status, exit 128 + signal (training/signals.py)
    with StopOnSignal():
        try:
            run_command()
        except Signalled as stop:  # before the run began, or after its results were written (main's own are lines)
            print(f"interrupted ({signal_name(stop.signum)}) outside the run: nothing of it changed", file=sys.stderr)
            sys.exit(exit_code(stop.signum))
    exit_without_teardown()  # only a run that ended well: every other exit is a normal one
