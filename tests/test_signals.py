"""Every signal at every phase (setup, training, test, analysis, report) leaves a true status, one line and the
documented exit code: 130 for Ctrl-C (SIGINT), 143 for SIGTERM (issue 25, item 5). The fast tests call the pieces
with the exception a signal raises in each phase; the slow ones send real signals to a real training."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from storage.results import wrong_types
from storage.rundir import RunDir, RunDirError
from tests.conftest import ROOT, SHORT_RUN
from training.failures import Interrupted, handle_failure
from training.signals import Signalled, StopOnSignal, exit_code

SMALL = [*SHORT_RUN]


def a_run(path: Path) -> RunDir:
    run = RunDir(path)
    run.path.mkdir(parents=True)
    run.claim(resuming=False)
    run.mark_running(None, {})
    return run


def stopped_in(phase: str, run: RunDir, signum=signal.SIGINT, results=None, stopper=None, resume=None):
    from training.run import Run

    life = Run(SimpleNamespace(resume=resume), run)
    life.trainer, life.loggers, life.stopper, life.results = (
        SimpleNamespace(global_step=120),
        [],
        stopper,
        results or {},
    )
    life.fit_started, life.fit_ended = 0.0, 12.5  # 12.5 s of training
    return life.stopped(signum, phase)


# ---- fast -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_exit_codes_are_128_plus_the_signal(signum, code, tmp_path, capsys):
    assert exit_code(signum) == code
    run = a_run(tmp_path / "run")
    assert handle_failure(Interrupted("stopped", signum), run, in_sweep=False, started=True) == code
    assert capsys.readouterr().err == "interrupted: stopped\n"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_before_training_is_a_line_and_a_failed_start(signum, tmp_path, capsys):
    run = a_run(tmp_path / "run")
    assert handle_failure(Signalled(signum), run, in_sweep=False, started=True) == exit_code(signum)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("interrupted: ") and "before training started" in err
    assert run.status == "failed"


def test_a_signal_never_turns_a_finished_run_failed(tmp_path):
    run = a_run(tmp_path / "run")
    run.write_results({"status": "ok", "test_exact_match": 0.9})
    handle_failure(KeyboardInterrupt(), run, in_sweep=False, started=True)
    assert run.read_results()["status"] == "ok"


def test_the_second_signal_in_a_step_is_signalled_not_keyboard_interrupt(tmp_path, monkeypatch):
    # Lightning answers KeyboardInterrupt with exit(1) and no line; anything else it re-raises to train.py
    import training.signals
    from training.callbacks import GracefulStop

    monkeypatch.setattr(training.signals, "_stopping", [])
    stop = GracefulStop(tmp_path)
    stop._training = True
    stop._request(signal.SIGINT, None)  # the first: at the end of the step
    assert stop.received == signal.SIGINT
    with pytest.raises(Signalled) as raised:
        stop._request(signal.SIGINT, None)
    assert not isinstance(raised.value, KeyboardInterrupt) and raised.value.signum == signal.SIGINT
    stop._request(signal.SIGINT, None)  # a third, while the status is written: ignored


def test_the_guard_raises_once_and_restores_the_handlers(monkeypatch):
    import training.signals

    monkeypatch.setattr(training.signals, "_stopping", [])
    before = signal.getsignal(signal.SIGTERM)
    with StopOnSignal():
        with pytest.raises(Signalled):
            signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)  # already stopping: ignored
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("best", [True, False])
def test_stopped_at_once_in_training_offers_the_best_checkpoint_or_says_nothing_to_resume(tmp_path, best):
    run = a_run(tmp_path / "run")
    if best:
        run.best_checkpoint.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"state_dict": {}}, run.best_checkpoint)  # a checkpoint that loads
    line = str(stopped_in("training", run, stopper=SimpleNamespace(received=signal.SIGINT)))
    state = run.read_results()
    assert state["status"] == "interrupted" and state["interrupted_phase"] == "training" and state["step"] == 120
    assert not wrong_types(state)
    if best:
        assert "a second Ctrl-C" in line and f"resume={run.best_checkpoint}" in line
        assert state["checkpoint"] == str(run.best_checkpoint) and state["resume"] in line
        assert "best.ckpt" in str(pytest.raises(RunDirError, run.resume_checkpoint).value)  # resume=<run> says so too
    else:
        assert "nothing to resume" in line and state["checkpoint"] is None and "resume" not in state


def test_stopped_in_the_test_keeps_the_training_and_says_there_are_no_test_results(tmp_path):
    run = a_run(tmp_path / "run")
    run.best_checkpoint.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {}}, run.best_checkpoint)  # a checkpoint that loads
    error = stopped_in("test", run, signal.SIGTERM)
    assert error.signum == signal.SIGTERM and "no test results" in str(error) and "calc.py --ckpt" in str(error)
    state = run.read_results()
    assert state["status"] == "interrupted" and state["interrupted_phase"] == "test"


@pytest.mark.parametrize("phase", ["analysis", "report"])
def test_stopped_in_the_analysis_or_report_records_the_finished_run_as_ok(tmp_path, phase):
    run = a_run(tmp_path / "run")
    record = {"status": "ok", "test_exact_match": 0.875, "steps": 120}
    if phase == "report":
        run.write_results(record)  # written before the page
    (run.interrupted_checkpoint.parent).mkdir(parents=True, exist_ok=True)
    run.interrupted_checkpoint.write_bytes(b"the state a resumed run came from")
    line = str(stopped_in(phase, run, results=dict(record), resume=str(run.path)))
    state = run.read_results()
    assert state["status"] == "ok" and state["test_exact_match"] == 0.875 and state["interrupted_phase"] == phase
    assert not wrong_types(state)
    assert not run.interrupted_checkpoint.exists()  # used up: the resume command must not retrain a finished run
    assert "0.8750" in line
    again = f"python analyse.py {run.path}" if phase == "analysis" else f"python -m analysis.html_report {run.path}"
    assert again in line  # the command that finishes what the signal stopped


def test_a_further_signal_while_the_run_ends_on_one_keeps_the_first_ones_line(tmp_path, capsys):
    """A second Ctrl-C as the run leaves (after its record says "interrupted") used to print "before training
    started; nothing to resume" over the run's true line."""
    from training.run import run_job

    run = a_run(tmp_path / "run")

    def job() -> dict:
        try:
            raise Interrupted("stopped at step 22; continue with: python train.py resume=run", signal.SIGINT)
        finally:
            raise Signalled(signal.SIGINT)  # the second signal, while the first one's Interrupted leaves

    with pytest.raises(SystemExit) as ended:
        run_job(job, run, in_sweep=False)
    assert ended.value.code == 130
    assert capsys.readouterr().err == "interrupted: stopped at step 22; continue with: python train.py resume=run\n"


@pytest.mark.parametrize("owned", [True, False])
def test_the_runs_handlers_are_the_only_ones_through_fit_and_test(tmp_path, owned):
    """TheRunsSignals: while Lightning fits and tests, SIGTERM and SIGINT reach the run's handler and nothing else
    (Lightning's own, composed with it, raised SystemExit -- exit 0 -- at the step's end); its teardown leaves them.
    The other row shows the check sees Lightning's handler where the run does not take them."""
    import lightning as L
    from lightning.pytorch.demos.boring_classes import BoringModel

    from training.callbacks import TheRunsSignals

    took: list[int] = []
    seen: list[object] = []

    def ours(signum, frame) -> None:
        took.append(signum)

    class Look(L.Callback):
        def on_train_batch_start(self, trainer, *args) -> None:
            seen.extend(signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM))
            if trainer.global_step == 0:
                signal.raise_signal(signal.SIGTERM)

        def on_test_batch_start(self, trainer, *args) -> None:
            seen.extend(signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM))

    before = [signal.signal(s, ours) for s in (signal.SIGINT, signal.SIGTERM)]
    try:
        trainer = L.Trainer(
            accelerator="cpu", max_steps=2, limit_test_batches=1, logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
            callbacks=[Look(), TheRunsSignals()] if owned else [Look()],
        )  # fmt: skip
        try:
            trainer.fit(BoringModel())
            trainer.test(BoringModel(), verbose=False)
        except SystemExit:  # Lightning's SIGTERMException
            assert not owned
        after = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    finally:
        for s, handler in zip((signal.SIGINT, signal.SIGTERM), before, strict=True):
            signal.signal(s, handler)
    if owned:
        assert seen and all(handler is ours for handler in seen) and after == [ours, ours]
        assert took == [signal.SIGTERM] and not trainer.received_sigterm
    else:
        assert any(handler is not ours for handler in seen) and trainer.received_sigterm


# ---- slow: real trainings, real signals ----------------------------------------------------------------------
def signals_as_in_a_terminal() -> None:
    """The child's Ctrl-C and SIGTERM as a terminal's foreground command has them: a test suite started with nohup
    or in the background (``&``) ignores SIGINT, and a child inherits that -- the commands then rightly keep it
    ignored (training/signals.py), which is not what these tests ask about."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def start(run_dir: Path, *overrides: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={run_dir}", *SMALL, *overrides],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=signals_as_in_a_terminal,
    )


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while not path.exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.02)
    assert path.exists() and process.poll() is None, f"{path} never appeared while the run went on"


def ended(process: subprocess.Popen) -> str:
    _, stderr = process.communicate(timeout=300)
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted: ")]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


@pytest.mark.slow  # one training
def test_two_ctrl_c_within_one_step_still_interrupt_with_130_and_a_checkpoint_to_continue_from(tmp_path):
    run_dir = tmp_path / "run"
    process = start(run_dir, "trainer.max_steps=100000", "target_accuracy=null", "analysis=none")
    wait_for(run_dir / "checkpoints" / "best.ckpt", process)
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGINT)  # at once: within the same step
    line = ended(process)
    assert process.returncode == 130, line
    state = json.loads((run_dir / "results.json").read_text())
    assert state["status"] == "interrupted" and not (run_dir / "run.lock").exists()
    assert state["checkpoint"] and Path(state["checkpoint"]).is_file() and "resume=" in line
    assert not list((run_dir / "checkpoints").glob("*.partial"))


@pytest.mark.slow  # one training per signal
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_analysis_keeps_the_finished_run_ok(tmp_path, signum):
    run_dir = tmp_path / "run"
    process = start(run_dir, "trainer.max_steps=100", "target_accuracy=null")
    wait_for(RunDir(run_dir).mistakes, process)  # written once the test is recorded, as the analysis begins
    process.send_signal(signum)
    line = ended(process)
    assert process.returncode == exit_code(signum), line
    state = json.loads((run_dir / "results.json").read_text())
    assert state["status"] == "ok" and "test_exact_match" in state, state
    assert state["interrupted_phase"] in ("analysis", "report")  # the analysis of a small run can be quick
    again = "python analyse.py" if state["interrupted_phase"] == "analysis" else "analysis.html_report"
    assert again in line and not (run_dir / "run.lock").exists()  # the command that finishes the stopped phase


def test_a_second_signal_while_the_saved_step_is_recorded_is_a_second_signal_not_a_failed_start(tmp_path):
    """The first Ctrl-C finished the step and saved interrupted.ckpt; a second one while results.json says so stops
    at once -- and the line still offers interrupted.ckpt, the record says interrupted (never "failed")."""
    from training.run import Run

    run = a_run(tmp_path / "run")
    run.interrupted_checkpoint.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {}}, run.interrupted_checkpoint)
    life = Run(SimpleNamespace(resume=None), run)
    life.trainer, life.loggers = SimpleNamespace(global_step=120), []
    life.stopper = SimpleNamespace(signal=signal.SIGINT, received=signal.SIGINT, saved=run.interrupted_checkpoint)
    record = run.mark_interrupted
    calls = []

    def second_signal_at_first(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise Signalled(signal.SIGINT)
        record(*args, **kwargs)

    run.mark_interrupted = second_signal_at_first
    with pytest.raises(Interrupted) as stopped:
        with life.phase("training"):
            pass
    assert "a second Ctrl-C" in str(stopped.value) and str(run.interrupted_checkpoint) in str(stopped.value)
    state = run.read_results()
    assert state["status"] == "interrupted" and state["checkpoint"] == str(run.interrupted_checkpoint)


# ---- a signal while a command's imports run (issue 40) -------------------------------------------------------------
COMMANDS = {  # each command, with arguments that get it past its first imports (none of them finishes first)
    "train.py": ["threads=1", "logger=none", "analysis=none", "trainer.max_steps=5"],
    "calc.py": ["--ckpt", "{tmp}/none", "1+2"],
    "analyse.py": ["{tmp}/none"],
    "verify.py": ["{tmp}/none"],
    "bench.py": ["--help"],
}
SIGNALLED_LINE = {**dict.fromkeys(COMMANDS, ""), "train.py": " before the run began: nothing written"}


def test_importing_a_command_leaves_the_importers_signal_handlers():
    """Each command guards the signals when it runs, not when imported: a test that imports train.py once made the
    whole pytest process stop on Ctrl-C with train.py's line, and later commands it started ignored Ctrl-C."""
    script = (
        "import signal, sys; before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]\n"
        "import train, calc, analyse, verify, bench\n"
        "sys.exit([signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] != before)"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize(
    "command,signum", [(command, signal.SIGINT) for command in COMMANDS] + [("train.py", signal.SIGTERM)]
)
def test_a_signal_while_a_command_imports_is_one_line_and_128_plus_the_signal(command, signum, tmp_path):
    """Ctrl-C in a command's first second -- here exactly while torch is being imported (``-X importtime`` writes a
    line as each module has loaded; torch's own submodules load before torch does) -- used to be a traceback from
    inside whichever module was loading. Now it is one line and 130 (143 for SIGTERM) for every command
    (training/signals.py: guard_command, each command's first line), and train.py leaves no run directory."""
    args = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]]
    if command == "train.py":
        args.append(f"hydra.run.dir={tmp_path / 'run'}")
    process = subprocess.Popen(
        [sys.executable, "-X", "importtime", str(ROOT / command), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "WANDB_MODE": "offline"},
        preexec_fn=signals_as_in_a_terminal,
    )
    for line in process.stderr:  # "import time: <self> | <cumulative> | <module>"
        if line.rsplit("|", 1)[-1].strip().startswith("torch."):
            process.send_signal(signum)
            break
    else:
        pytest.fail(f"{command} ended before it imported torch")
    rest = process.stderr.read()
    process.wait(timeout=60)
    said = [line for line in rest.splitlines() if not line.startswith("import time:")]
    assert process.returncode == 128 + signum, rest[-2000:]
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert said == [f"interrupted ({name}){SIGNALLED_LINE[command]}"], said
    assert process.stdout.read() == ""
    assert not (tmp_path / "run").exists()


# ---- issue 58: SIGTERM keeps the promise Ctrl-C keeps -- every phase, one process and two (DDP), direct, through
# `timeout`, in a sweep. A real signal at a chosen moment: tests/stop_at.py (WHEN:SIGNAL:RANK) ---------------------
SMALL_TASK = ["data.digits=2", "data.val_fraction=0.05", "data.test_fraction=0.05", "data.n_val=100", "data.n_test=100"]
STOP_RUN = [*SMALL_TASK, "trainer.val_check_interval=10", "target_accuracy=null", "callbacks.attention_maps=null"]
STOP_RUN += ["logger=none", "analysis=none", "threads=1"]  # and max_steps: 30, or long
DDP = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"]


def command(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "WANDB_MODE": "offline"},
        preexec_fn=signals_as_in_a_terminal,
    )


def stop_at(when: str, run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    return command("tests/stop_at.py", when, f"hydra.run.dir={run_dir}", *STOP_RUN, "trainer.max_steps=30", *overrides)


def kept_the_promise(code: int, stderr: str, run_dir: Path, signum: int, phase: str = "training") -> dict:
    """The promise of docs/reliability.md: exit 128 + the signal, exactly one ``interrupted:`` line (whichever process
    the signal reached), no traceback, a record that says "interrupted" in ``phase`` with the command that continues
    it -- from interrupted.ckpt after a signal in training. The record."""
    assert code == exit_code(signum), stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted")]
    assert len(lines) == 1, stderr[-3000:]
    state = json.loads((run_dir / "results.json").read_text())
    assert state["status"] == "interrupted" and state["interrupted_phase"] == phase, state
    assert state["resume"] in lines[0] and Path(state["checkpoint"]).is_file(), (state, lines)
    if phase == "training":
        assert state["checkpoint"] == str(run_dir / "checkpoints" / "interrupted.ckpt")
        assert str(run_dir) in state["resume"] and "checkpoints" not in state["resume"]  # resume=<the run>
    assert not (run_dir / "run.lock").exists()
    return state


def resumed_record(run_dir: Path) -> tuple[dict, list]:
    from tests.test_exact_resume import record

    done = command("train.py", f"resume={run_dir}")
    assert done.returncode == 0, done.stderr[-2000:]
    return record(run_dir)


def test_sigterm_in_training_saves_the_step_and_exits_143(tmp_path):
    """Lightning's own SIGTERM handler used to end the run with 0 at the step's end: nothing saved, "running"."""
    stopped = stop_at("20:SIGTERM", tmp_path / "run")
    assert kept_the_promise(stopped.returncode, stopped.stderr, tmp_path / "run", signal.SIGTERM)["step"] == 20


@pytest.mark.slow  # three trainings (~55 s on a loaded 2-core machine)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_training_resumes_equal_to_the_run_uninterrupted(tmp_path, signum):
    from tests.test_exact_resume import record

    stopped = stop_at(f"20:{signal.Signals(signum).name}", tmp_path / "run")
    assert kept_the_promise(stopped.returncode, stopped.stderr, tmp_path / "run", signum)["step"] == 20
    whole = command("train.py", f"hydra.run.dir={tmp_path / 'whole'}", *STOP_RUN, "trainer.max_steps=30")
    assert whole.returncode == 0, whole.stderr[-2000:]
    assert resumed_record(tmp_path / "run") == record(tmp_path / "whole")


@pytest.mark.slow  # one training a row (~17 s on a loaded 2-core machine)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_the_test_is_its_code_one_line_and_the_best_weights_to_continue(tmp_path, signum):
    stopped = stop_at(f"test:{signal.Signals(signum).name}", tmp_path / "run")
    state = kept_the_promise(stopped.returncode, stopped.stderr, tmp_path / "run", signum, phase="test")
    assert state["checkpoint"] == str(tmp_path / "run" / "checkpoints" / "best.ckpt") and state["step"] == 30


@pytest.mark.slow  # a 2-process training a row (~40 s)
@pytest.mark.parametrize(
    "when",
    ["20:SIGINT", "20:SIGTERM", "20:SIGTERM:1", "test:SIGTERM", "test:SIGTERM:1"],
)
def test_a_signal_to_either_process_of_a_ddp_run_stops_both_with_one_line_and_its_code(tmp_path, when):
    """Whichever process the signal reached, both stop at the same step (or both leave the test); the first says so,
    once, and sets the exit code. SIGTERM to the second process used to stall two minutes in gloo."""
    phase_or_step, name, *rank = when.split(":")
    stopped = stop_at(when, tmp_path / "run", *DDP)
    phase = "test" if phase_or_step == "test" else "training"
    state = kept_the_promise(stopped.returncode, stopped.stderr, tmp_path / "run", signal.Signals[name], phase)
    if phase == "training":  # the second process takes the signal when it next runs Python: this step or the next
        assert state["step"] in ((20,) if not rank else (20, 21)), state


@pytest.mark.slow  # three 2-process trainings (~2 min)
def test_a_ddp_run_sigterm_stopped_through_its_second_process_resumes_equal_to_the_run_uninterrupted(tmp_path):
    from tests.test_exact_resume import record

    stopped = stop_at("20:SIGTERM:1", tmp_path / "run", *DDP)
    kept_the_promise(stopped.returncode, stopped.stderr, tmp_path / "run", signal.SIGTERM)
    whole = command("train.py", f"hydra.run.dir={tmp_path / 'whole'}", *STOP_RUN, "trainer.max_steps=30", *DDP)
    assert whole.returncode == 0, whole.stderr[-2000:]
    assert resumed_record(tmp_path / "run") == record(tmp_path / "whole")


def through_timeout(run_dir: Path, *overrides: str) -> tuple[int, str]:
    """``timeout -s TERM`` (coreutils) around a training that would run for long, told to stop once a checkpoint
    exists: SIGTERM to timeout, which passes it on as it does when its time is up -- to the command and to its
    process group (a DDP run's every process). (exit code, stderr)."""
    process = subprocess.Popen(
        ["timeout", "-s", "TERM", "3600", sys.executable, "train.py", f"hydra.run.dir={run_dir}", *STOP_RUN,
         "trainer.max_steps=100000", *overrides],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=signals_as_in_a_terminal,
    )  # fmt: skip
    wait_for(run_dir / "checkpoints" / "best.ckpt", process)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    return process.returncode, stderr


@pytest.mark.slow  # one training (~20 s), and a 2-process one (~40 s)
@pytest.mark.parametrize("processes", [1, 2])
def test_sigterm_through_timeout_keeps_the_promise(tmp_path, processes):
    code, stderr = through_timeout(tmp_path / "run", *(DDP if processes == 2 else []))
    kept_the_promise(code, stderr, tmp_path / "run", signal.SIGTERM)


def test_timeout_expiring_while_train_py_starts_is_one_line_and_143(tmp_path):
    """``timeout --preserve-status -s TERM 2``: the time is up during the imports (or just after them): one line,
    143 (without --preserve-status timeout itself says 124), and no run directory left."""
    done = subprocess.run(
        ["timeout", "--preserve-status", "-s", "TERM", "2", sys.executable, "train.py",
         f"hydra.run.dir={tmp_path / 'run'}", *STOP_RUN],
        cwd=ROOT, capture_output=True, text=True, timeout=120, preexec_fn=signals_as_in_a_terminal,
    )  # fmt: skip
    assert done.returncode == 143, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if not line.startswith("[")]  # Hydra's own log lines
    assert len(said) == 1 and said[0].startswith("interrupted (SIGTERM)"), said
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # one training (~20 s)
def test_a_sweep_sigterm_stopped_ends_with_143_and_says_so_not_0(tmp_path):
    """The job under way is stopped as a run is (interrupted.ckpt, its record and resume command); the sweep ends
    there with 143 and one line, its later jobs not started."""
    process = subprocess.Popen(
        [sys.executable, "train.py", "-m", *STOP_RUN, "trainer.max_steps=100000", "seed=1,2",
         f"hydra.sweep.dir={tmp_path}"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=signals_as_in_a_terminal,
    )  # fmt: skip
    deadline = time.time() + 300
    while not list(tmp_path.glob("0_*/checkpoints/best.ckpt")) and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    (job,) = tmp_path.glob("0_*")
    kept_the_promise(process.returncode, stderr, job, signal.SIGTERM)
    assert not list(tmp_path.glob("1_*"))


def test_a_peer_that_ended_is_named_with_how_it_ended(monkeypatch):
    import training.signals

    done, child = subprocess.Popen(["true"]), subprocess.Popen(["sleep", "60"])
    done.wait()
    monkeypatch.setattr(training.signals, "_children", [done, child])
    assert training.signals.a_peer_ended(wait=0) is None  # one ended well, one still runs
    child.kill()
    assert training.signals.a_peer_ended() == "process 2 (killed by SIGKILL)"


@pytest.mark.slow  # a 2-process training a row (~30 s)
@pytest.mark.parametrize("rank", ["0", "1"])
def test_kill_9_of_either_ddp_process_leaves_the_record_running_and_no_traceback(tmp_path, rank):
    """The docs' promise for a process killed with no chance to say so: the record stays "running" (the first
    process used to write "failed" with gloo's traceback when the second was killed); the first one, when it
    survives the other, says so in one line with the checkpoint to continue from and ends with 3."""
    stopped = stop_at(f"20:SIGKILL:{rank}", tmp_path / "run", *DDP)
    assert "Traceback" not in stopped.stderr, stopped.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "results.json").read_text())["status"] == "running"
    if rank == "0":
        assert stopped.returncode == -signal.SIGKILL
        return
    assert stopped.returncode == 3, stopped.stderr[-3000:]
    (line,) = [line for line in stopped.stderr.splitlines() if line.startswith("error:")]
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    assert "process 1 (killed by SIGKILL)" in line and f"resume={best}" in line
