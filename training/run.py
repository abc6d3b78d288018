"""A run's life, in one object: the directory it claims, the status it records, what a signal in each phase leaves
behind, and how the command ends.

    build -> training -> test -> analysis -> report          (the phases; each one a ``with run.phase(name):``)

    status in results.json   "running" from the first write; then "ok" (with the results), "interrupted" (with the
                             step, the checkpoint and the command that continues it) or "failed" (with the error) --
                             never "failed" over a finished or resumable run (RunDir.mark_failed)
    a signal in              training: at a step's end the step is saved (interrupted.ckpt), a second one stops at
                             once; test: training is kept, no test results; analysis, report: the run is finished
    exit code                0 ok, 2 a configuration mistake, 3 training stopped, 128 + signal (training/failures.py)
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from omegaconf import OmegaConf

from storage.rundir import RunDir, override
from training.collector import alive_frozen, freeze_alive
from training.failures import Interrupted, PeerEnded, handle_failure
from training.loggers import finish_wandb, wandb_run_id
from training.phases import Phases
from training.signals import Signalled, a_peer_ended, signal_name

SAMPLE_PROBLEMS = "examples/problems.txt"  # 3-digit additions, for the default task


class Run:
    """One training run in its directory ``run_dir``, from the config it was given to its record.

    process_started: when the command's first line ran (the first run of a process counts the imports as its
    ``startup`` phase; a sweep's later runs have none).
    """

    runs_in_process = 0  # a sweep runs its jobs one after another in one process

    def __init__(self, cfg, run_dir: RunDir, process_started: float | None = None):
        self.cfg, self.dir = cfg, run_dir
        self.started = time.perf_counter()
        first = Run.runs_in_process == 0
        Run.runs_in_process += 1
        self.phases = Phases(process_started if first and process_started is not None else self.started, self.started)
        self.previous = run_dir.read_results() if cfg.resume else {}  # the interrupted run this one continues
        self.results: dict = {}
        self.trainer = self.loggers = self.stopper = None
        self.fit_started, self.fit_ended = self.started, None
        self.main_process = True

    # ---- the phases ----------------------------------------------------------------------------------------
    def begin(self, trainer, callbacks, loggers, tokenizer, own_block=None) -> None:
        """Built: claim the directory, say "running", keep the tokenizer and the config, and a learner's block's
        source (``own_block``: model/own_block.py's OwnBlock) as text (phase ``build`` ends)."""
        from training.callbacks import GracefulStop
        from training.signals import mark_the_first_process

        mark_the_first_process()  # for the processes Lightning's launcher starts (TheRunsSignals keeps the signals)
        self.trainer, self.loggers = trainer, loggers
        self.stopper = next((c for c in callbacks if isinstance(c, GracefulStop)), None)
        self.main_process = trainer.is_global_zero
        if self.main_process:
            self.dir.claim(resuming=self.cfg.resume is not None)
            self.dir.mark_running(self.cfg.resume, self.previous)
            self.dir.write_text(self.dir.tokenizer, tokenizer.to_json())
            if not self.cfg.resume:
                self.dir.write_text(self.dir.config, OmegaConf.to_yaml(self.cfg, resolve=True))
            if own_block is not None:  # as text, beside its hash in the checkpoint: never imported from here
                self.dir.write_text(self.dir.attention_block, own_block.source)
            for logger in trainer.loggers:
                logger.log_hyperparams(OmegaConf.to_container(self.cfg, resolve=True))
        freeze_alive()  # what the build made (Lightning's imports among it) lives to the run's end: out of the scans
        self.phases.lap("build")
        self.fit_started = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Run one phase; a signal that stops it at once leaves the run's true status and raises Interrupted."""
        try:
            if name == "training":
                with self.saved_at_a_step():
                    yield
            else:
                yield
            if name == "training":
                self.fit_ended = time.perf_counter()
            self.phases.lap(name)
            if name in ("analysis", "report"):  # the run is finished: its record, with the seconds so far
                self.record()
            if name == "training" and self.stopper is not None and self.stopper.saved is not None:
                raise self.interrupted_at_a_step()  # a second signal while this is written: stopped() says so
        except Signalled as stop:
            if not self.main_process:
                raise
            if name == "analysis":
                self.results["total_seconds"] = self.seconds
            raise self.stopped(stop.signum, name) from None
        except Exception:
            if self.trainer is not None and self.trainer.world_size > 1 and (gone := a_peer_ended()) is not None:
                raise self.peer_ended(gone, name) from None  # its collective failed: the cause is the other's end
            raise

    def peer_ended(self, gone: str, phase: str) -> PeerEnded:
        """Another process of the run ended in ``phase`` (``gone``: which, and how): the record stays "running", as
        after ``kill -9`` (Lightning's launcher would kill this process within seconds anyway)."""
        said = f"{gone} of this {self.trainer.world_size}-process run ended in the {phase}, at step "
        said += f'{self.trainer.global_step}, and this one stopped with it; the record stays "running"'
        if self.dir.best_checkpoint.is_file():
            return PeerEnded(f"{said}; continue with: python train.py {override('resume', self.dir.best_checkpoint)}")
        return PeerEnded(f"{said}; no checkpoint had been saved yet: start again")

    @contextmanager
    def saved_at_a_step(self) -> Iterator[None]:
        """Lightning's own stop after a signal (SystemExit), or a second signal in a step: the run goes on to
        :meth:`interrupted_at_a_step` when the checkpoint of the step was saved; otherwise they propagate."""
        try:
            yield
        except (SystemExit, Signalled):
            if self.stopper is None or self.stopper.saved is None:
                raise

    @property
    def train_seconds(self) -> float:
        """Seconds of training, over every resumption of the run."""
        return self.previous.get("train_seconds", 0.0) + (self.fit_ended or time.perf_counter()) - self.fit_started

    @property
    def seconds(self) -> float:
        return round(time.perf_counter() - self.started, 2)

    def record(self) -> dict:
        """Write results.json: the run's record, with the phases' seconds so far (returned)."""
        self.results["phases"] = self.phases.seconds
        self.dir.write_results(self.results)
        return self.results

    def finished(self) -> None:
        """The run is recorded: the interrupted state a resumed run continued from is used up (running the resume
        command again must not retrain)."""
        if self.cfg.resume:
            self.dir.interrupted_checkpoint.unlink(missing_ok=True)

    @property
    def trained_a_step(self) -> bool:
        """Has this run trained a step of its own (a resumed one: past the step it continued from)?"""
        start = self.previous.get("step", 0) if self.cfg.resume else 0
        return self.trainer.global_step > (start if isinstance(start, int) else 0)

    # ---- what a signal leaves --------------------------------------------------------------------------------
    def interrupted_at_a_step(self) -> Interrupted:
        """The first signal in training: the step finished and was saved; the run continues from there."""
        step, saved = self.trainer.global_step, self.stopper.saved
        if self.main_process:
            self.dir.mark_interrupted(step, saved, self.train_seconds, wandb_run_id(self.loggers))
        return Interrupted(
            f"stopped at step {step}; checkpoint saved to {saved}; continue with: {self.dir.resume_command}",
            self.stopper.signal,
        )

    def stopped(self, signum: int, phase: str) -> Interrupted:
        """Write the true status of a run that ``signum`` stopped at once in ``phase``; the line to end with.

        training (a second signal within one step): the step under way is not saved (its weights may be half
        updated); the run continues from interrupted.ckpt if there is one (a resumed run's), else from best.ckpt,
        else nothing. test: training had finished; no test results. analysis, report: the run is finished and
        recorded (status ok).
        """
        name, step, run_dir = signal_name(signum), self.trainer.global_step, self.dir
        if phase == "training" and not self.trained_a_step and run_dir.put_back():
            return left_as_it_was(signum)
        if phase in ("training", "test"):
            if run_dir.interrupted_checkpoint.is_file():  # a resumed run's: continues it exactly
                checkpoint, resume = run_dir.interrupted_checkpoint, run_dir.resume_command
            elif run_dir.best_checkpoint.is_file():
                checkpoint = run_dir.best_checkpoint
                resume = f"python train.py {override('resume', checkpoint)}"
            else:
                checkpoint = resume = None
            run_dir.mark_interrupted(step, checkpoint, self.train_seconds, wandb_run_id(self.loggers), resume, phase)
            if phase == "training":
                again = "a second " if self.stopper is not None and self.stopper.received is not None else ""
                said = f"{again}{name}: stopped at once in step {step}, whose weights were not saved"
            else:
                said = f"{name} during the test: training had finished (step {step}) but there are no test results"
            if checkpoint is None:
                return Interrupted(f"{said}; no checkpoint had been saved yet: nothing to resume, start again", signum)
            use = f"; or use these weights as they are: python calc.py --ckpt {checkpoint}" if phase == "test" else ""
            return Interrupted(f"{said}; continue from {checkpoint} with: {resume}{use}", signum)
        # the training and the test finished: the record is true; the interrupted state (a resumed run's) is used up
        run_dir.write_results({**self.results, "interrupted_phase": phase})
        self.finished()
        results = self.results
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


def left_as_it_was(signum: int) -> Interrupted:
    """A signal before a resumed run trained a step: the run it continues is as it was (its record too)."""
    return Interrupted(
        f"{signal_name(signum)} before the resumed run trained a step: the run is as it was (its checkpoint and "
        "record untouched); continue it with the same command",
        signum,
    )


def run_job(job: Callable[[], dict], run_dir: RunDir, in_sweep: bool, resuming: bool = False) -> dict | None:
    """Run one job of the command (its results, or None after a failure a sweep goes on from): a failure becomes one
    line, a true status and an exit code (training/failures.py); wandb is closed and the directory released
    whatever happens. ``resuming`` (resume=): a signal before the run's phases began leaves the run as it was."""
    try:
        with alive_frozen():  # training/collector.py: the collector's scans skip what the imports made
            return job()
    except (Exception, KeyboardInterrupt, Signalled) as error:  # noqa: BLE001 -- handle_failure re-raises bugs
        if isinstance(error, Signalled) and isinstance(error.__context__, Interrupted):
            error = error.__context__  # a further signal while the run ended on one: the line is the first one's
        if resuming and isinstance(error, (KeyboardInterrupt, Signalled)):
            run_dir.put_back()  # the record it replaced, if it had begun
            error = left_as_it_was(error.signum if isinstance(error, Signalled) else signal.SIGINT)
        code = handle_failure(error, run_dir, in_sweep, started=run_dir.owns_lock)
        if code is not None:
            sys.exit(code)
        return None
    finally:
        try:
            finish_wandb()
        finally:  # a signal while wandb closes still leaves no lock behind
            run_dir.release()


def next_steps(results: dict) -> str:
    """What to do with the run now: its page, and calc.py on it (with the sample problems file when it fits)."""
    run, fmt = results["run_dir"], results["data"]
    digits, op = int(fmt["digits"]), str(fmt["operators"])[0]
    b_width = int(fmt.get("b_digits") or 0) or max(1, digits - 1)  # a short b where the run drew one
    example = f"{'1' * digits}{op}{'2' * b_width}"
    if int(fmt.get("operands") or 2) > 2:  # a sum of as many operands as it was trained on (data/sums.py)
        example = "+".join(str(j % 9 + 1) * digits for j in range(int(fmt["operands"])))
    lines = [
        "next:",
        f"  look     {run}/report.html   (open it in a browser: the run on one page)",
        f"  ask      python calc.py --ckpt {run} {example}",
    ]
    if "+" in str(fmt["operators"]) and digits >= 3:
        lines.append(f"  score    python calc.py --ckpt {run} --eval {SAMPLE_PROBLEMS}")
    return "\n".join(lines)


def run_command(main: Callable[[], None]) -> None:
    """The whole command: the command line checked (typos, used run directories and ones in use: one line, before
    Hydra writes anything), the directory claimed and pinned, ``main`` run; a signal outside any run is one line and
    128 + signal. A directory that no run began in is left as it was found."""
    from training.cli import check_command_line
    from training.failures import EXIT_WORKER_STOPPED
    from training.signals import StopOnSignal, a_worker_process, exit_code, lift_guard

    lift_guard()  # the imports are done: from here StopOnSignal says what a signal left
    with StopOnSignal():  # Ctrl-C and SIGTERM, from here to the end: a line, a true status, exit 128 + signal
        try:
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
        except Signalled as stop:  # before the run began, or after its results were written (runs say their own)
            if a_worker_process():  # the first process of a multi-process run speaks for it
                sys.exit(EXIT_WORKER_STOPPED)
            print(f"interrupted ({signal_name(stop.signum)}) outside the run: nothing of it changed", file=sys.stderr)
            sys.exit(exit_code(stop.signum))
