"""The run directory is written once, by one run: nothing finished is lost, nothing is mixed, and a run that
did not finish says so (to calc.py and to resume=)."""

from __future__ import annotations

import http.server
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

from storage.results import SCHEMA
from storage.rundir import RunDir, RunDirError
from tests.conftest import ROOT, SMALL_TASK, kill_once_checkpointed, run_train

SMALL = [
    *SMALL_TASK,
    "trainer.val_check_interval=20",
    "logger=none",
    "analysis=none",
]


def finished_run(path) -> RunDir:
    """A directory that looks like a finished run (results, config, a checkpoint file)."""
    run = RunDir(path)
    run.checkpoints.mkdir(parents=True)
    torch.save({"state_dict": {}}, run.best_checkpoint)  # loads (weights_only): a checkpoint resume may offer
    run.config.write_text("seed: 0\n")
    (run.path / ".hydra").mkdir()
    (run.path / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
    run.write_results({"status": "ok", "test_exact_match": 0.99})
    return run


# ---- in this process --------------------------------------------------------------------------------------
def test_a_new_run_claims_an_empty_directory_and_releases_it(tmp_path):
    run = RunDir(tmp_path / "run")
    run.claim(resuming=False)
    assert run.lock.read_text() == str(os.getpid()) and run.owns_lock and run.owner() is None  # ours, not another's
    run.release()
    assert not run.lock.exists() and not run.owns_lock


def test_a_used_directory_is_refused_and_kept_as_it_was(tmp_path):
    run = finished_run(tmp_path / "run")
    before = run.results.read_text()
    with pytest.raises(RunDirError, match="holds a run already"):
        RunDir(run.path).claim(resuming=False)
    assert run.results.read_text() == before


@contextmanager
def held_by_another_process(kind: str, path):
    """A process holding the lock of ``kind(path)`` (RunDir or SweepDir, claimed) until the block ends."""
    claim = "claim(resuming=True)" if kind == "RunDir" else "claim()"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from storage.rundir import {kind}; {kind}({str(path)!r}).{claim}; print('held', "
         "flush=True); input()"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_a_directory_in_use_by_a_live_process_is_refused_even_when_resuming(tmp_path):
    run = RunDir(tmp_path / "run")
    with held_by_another_process("RunDir", run.path) as holder:
        assert run.owner() == holder.pid
        with pytest.raises(RunDirError, match=f"in use by another run \\(pid {holder.pid}\\)"):
            run.claim(resuming=True)
    # killed (SIGKILL: no chance to clean up): the OS freed its lock; its file, naming it, is left and blocks nothing
    assert run.lock.read_text() == str(holder.pid) and run.owner() is None
    run.claim(resuming=True)
    assert run.owns_lock and run.lock.read_text() == str(os.getpid())
    run.release()


def test_a_sweep_directory_in_use_by_a_live_sweep_is_refused_until_it_ends(tmp_path):
    from storage.rundir import SweepDir

    sweep = SweepDir(tmp_path / "sweep")
    with held_by_another_process("SweepDir", sweep.path) as holder:
        with pytest.raises(RunDirError, match=f"in use by another sweep \\(pid {holder.pid}\\)"):
            sweep.claim()
    sweep.claim()  # its process is gone: the OS freed the lock
    sweep.release()
    assert not sweep.lock.exists()


def test_a_lock_file_no_process_holds_blocks_nothing_whatever_it_says(tmp_path):
    """A killed run's lock file, or one copied with the run, names a pid -- maybe a live process's, maybe this one's:
    only the OS lock counts."""
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    for text in (str(os.getpid()), "1", "garbage"):
        run.lock.write_text(text)
        assert run.owner() is None
        run.claim(resuming=True)
        run.release()


@pytest.mark.parametrize(
    "path", ["runs/2026-01-01_12-00-00", "multirun/2026-01-01/12-00-00/0_a=b,c=d", "it's a \\\"x\\"]
)
def test_the_printed_resume_command_reads_back_as_the_directory(path):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    command = RunDir(path).resume_command
    words = shlex.split(command)
    assert words[:2] == ["python", "train.py"] and len(words) == 3, command
    parsed = OverridesParser.create().parse_override(words[2])
    assert parsed.key_or_group == "resume" and parsed.value() == path, command


def test_of_runs_started_together_exactly_one_claims_the_directory(tmp_path):
    run = tmp_path / "run"
    claim = (
        "import sys, time; from storage.rundir import RunDir, RunDirError\n"
        "r = RunDir(sys.argv[1])\n"
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "try:\n    r.claim(resuming=False); print('claimed', flush=True); time.sleep(3)\n"
        "except RunDirError as e:\n    print('refused', e, flush=True)\n"
    )
    start = time.time() + 2
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", claim, str(run), str(start)], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outcomes = [p.communicate(timeout=60)[0].split()[0] for p in racers]
    assert sorted(outcomes) == ["claimed", "refused", "refused", "refused"], outcomes


def test_a_failure_never_overwrites_finished_or_resumable_results(tmp_path):
    run = finished_run(tmp_path / "run")
    run.mark_failed("something went wrong later")
    assert run.read_results()["status"] == "ok"
    run.write_results({"status": "interrupted", "step": 10})
    run.mark_failed("something went wrong later")
    assert run.read_results()["status"] == "interrupted"
    run.write_results({"status": "running"})
    run.mark_failed("boom")
    assert run.read_results() == {"schema": SCHEMA, "status": "failed", "error": "boom"}


@pytest.mark.parametrize(
    "status,expected", [("ok", "finished"), ("running", "best.ckpt"), (None, "no checkpoints/interrupted.ckpt")]
)
def test_resume_says_what_would_work(tmp_path, status, expected):
    run = finished_run(tmp_path / "run")
    if status is None:
        run.results.unlink()
    else:
        run.write_results({"status": status})
    with pytest.raises(RunDirError, match=expected):
        run.resume_checkpoint()


def test_a_directory_only_hydra_wrote_to_is_removed(tmp_path):
    run = RunDir(tmp_path / "run")
    run.claim(resuming=False)  # this process made the directory: a run that never began takes it away again
    (run.path / ".hydra").mkdir(parents=True)
    run.discard_if_unused()
    assert not run.path.exists()
    kept = finished_run(tmp_path / "kept")
    kept.discard_if_unused()
    assert kept.results.exists()


def test_new_run_directories_never_collide(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = RunDir.new_path()
    os.makedirs(first)
    assert RunDir.new_path() != first


# ---- wandb online decides within seconds --------------------------------------------------------------------
def silent_server() -> tuple[socket.socket, int]:
    """A local TCP server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    return server, server.getsockname()[1]


def wandb_problem_of_a_command(env: dict, timeout: float = 2.0) -> str:
    """wandb_problem as a command meets it: once, in a fresh process (wandb reads its settings once per process)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k not in ("HOME", "NETRC")}
    done = subprocess.run(
        [sys.executable, "-c", f"from training.loggers import wandb_problem; print(wandb_problem({timeout}))"],
        cwd=ROOT, env={**keep, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_wandb_check_gives_up_on_a_server_that_never_answers(tmp_path):
    server, port = silent_server()
    try:
        env = {"HOME": str(tmp_path), "WANDB_API_KEY": "x" * 40, "WANDB_BASE_URL": f"http://127.0.0.1:{port}"}
        started = time.monotonic()
        problem = wandb_problem_of_a_command(env)
        assert time.monotonic() - started < 10 and problem.startswith("no answer within 2s"), problem
    finally:
        server.close()


class NotFound(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 -- http.server's naming
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


@contextmanager
def refusing_server() -> Iterator[str]:
    """A local server that answers every request with 404: where a wandb key is sent and refused."""
    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def test_wandb_check_names_a_server_that_refuses_the_key(tmp_path):
    with refusing_server() as url:
        problem = wandb_problem_of_a_command({"HOME": str(tmp_path), "WANDB_API_KEY": "x" * 40, "WANDB_BASE_URL": url})
    assert url in problem and "refused the key" in problem and "\n" not in problem, problem


@pytest.mark.parametrize("where", ["none", "HOME", "NETRC"])
def test_wandb_check_finds_the_key_where_wandb_does(tmp_path, where):
    """wandb's own lookup of the key: none (one line), or one in the netrc -- ~/.netrc, or where $NETRC says -- that
    it then sends to the server (here a local one that refuses it)."""
    with refusing_server() as url:
        env = {"HOME": str(tmp_path), "WANDB_BASE_URL": url}  # no ~/.netrc, no wandb settings unless written here
        netrc = tmp_path / (".netrc" if where == "HOME" else "elsewhere")
        if where != "none":
            host = url.removeprefix("http://")  # wandb's netrc entry is its server's host:port
            netrc.write_text(f"machine {host}\n  login user\n  password {'k' * 40}\n")
            netrc.chmod(0o600)
        if where == "NETRC":
            env["NETRC"] = str(netrc)
        problem = wandb_problem_of_a_command(env)
    if where == "none":
        assert problem == "no wandb API key (run `wandb login` or set WANDB_API_KEY)"
    else:
        assert "refused the key" in problem, problem  # found, sent, refused: not "no wandb API key"


@pytest.mark.slow
def test_a_run_against_a_silent_wandb_server_logs_offline_within_seconds(tmp_path, monkeypatch):
    server, port = silent_server()
    try:
        monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
        monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{port}")
        monkeypatch.delenv("WANDB_MODE", raising=False)
        done = run_train(
            tmp_path / "run",
            *SMALL[:-2],
            "analysis=none",
            "trainer.max_steps=20",
            "callbacks.attention_maps=null",
            "logger.wandb.mode=online",
        )
    finally:
        server.close()
    assert done.returncode == 0, done.stderr[-2000:]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: wandb")]
    assert len(warnings) == 1 and "no answer" in warnings[0] and "offline" in warnings[0]
    assert "Traceback" not in done.stderr


# ---- through the commands --------------------------------------------------------------------------------------
def test_a_failed_resume_leaves_a_finished_run_intact(tmp_path):
    run = finished_run(tmp_path / "run")
    before = {p.name: p.read_bytes() for p in (run.results, run.config, run.best_checkpoint)}
    for overrides in ([f"resume={run.path}"], [f"resume={run.best_checkpoint}", "model.n_heads=8"]):
        done = subprocess.run(
            [sys.executable, str(ROOT / "train.py"), *overrides], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert {p.name: p.read_bytes() for p in (run.results, run.config, run.best_checkpoint)} == before


def test_a_second_run_into_a_used_directory_is_refused_before_hydra_writes(tmp_path):
    run = finished_run(tmp_path / "run")
    hydra_before = (run.path / ".hydra" / "overrides.yaml").read_text()
    done = run_train(run.path, *SMALL, "trainer.max_steps=5")
    assert done.returncode == 2 and "holds a run already" in done.stderr and "Traceback" not in done.stderr
    assert (run.path / ".hydra" / "overrides.yaml").read_text() == hydra_before
    assert run.read_results()["status"] == "ok"


@pytest.mark.slow
def test_a_killed_run_is_marked_unfinished_and_calc_warns(tmp_path):
    root = tmp_path / "project"
    run = RunDir(root / "runs" / "killed")
    kill_once_checkpointed(
        run, *SMALL, "trainer.max_steps=5000", "target_accuracy=null", "callbacks.attention_maps=null"
    )
    assert run.status == "running" and run.unfinished

    done = subprocess.run(
        [sys.executable, str(ROOT / "calc.py"), "12+34"], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "did not finish" in done.stderr and f"resume={run.best_checkpoint}" in done.stderr
    resumed = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), f"resume={run.path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 2 and f"resume={run.best_checkpoint}" in resumed.stderr
    assert json.loads(run.results.read_text())["status"] == "running"


def running_run(path) -> RunDir:
    """A run directory in the middle of training (its lock: held_by_another_process)."""
    run = finished_run(path)
    run.write_results({"status": "running"})
    return run


def snapshot(path) -> dict:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("sweep", [False, True])
def test_a_command_refused_by_a_live_run_touches_nothing_of_it(tmp_path, sweep):
    """The refused command writes neither results.json (no 'failed' over a live run) nor Hydra's files."""
    if sweep:
        root = tmp_path / "sweep"
        run = running_run(root / "0_seed=1")
        (root / "multirun.yaml").write_text("the first sweep's\n")
        argv = ["-m", *SMALL, "trainer.max_steps=5", "seed=1,2", f"hydra.sweep.dir={root}"]
    else:
        run = running_run(tmp_path / "run")
        root = run.path
        argv = [f"hydra.run.dir={root}", *SMALL, "trainer.max_steps=5"]
    with held_by_another_process("RunDir", run.path) as holder:
        before = snapshot(root)
        done = subprocess.run(
            [sys.executable, str(ROOT / "train.py"), *argv], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), done.stderr
        assert str(holder.pid) in lines[0] or "holds" in lines[0]
        assert snapshot(root) == before


def test_a_refused_sweep_job_writes_no_failure_into_the_run_that_holds_its_directory(tmp_path):
    from training.failures import handle_failure

    run = finished_run(tmp_path / "job")
    run.write_results({"status": "running"})
    error = RunDirError(f"{run.path} is in use by another run (pid 1)")
    assert handle_failure(error, RunDir(run.path), in_sweep=True, started=False) is None
    assert run.read_results() == {"schema": SCHEMA, "status": "running"}
    fresh = RunDir(tmp_path / "fresh")  # a job that failed before it began: the sweep summary reads why
    (fresh.path / ".hydra").mkdir(parents=True)
    handle_failure(RunDirError("bad"), fresh, in_sweep=True, started=False)
    assert fresh.read_results() == {"schema": SCHEMA, "status": "failed", "error": "bad"}
