"""Crash-safe files, damaged directories and which model answers (issue 25, items 4, 7, 9, 11, 12).

Fast: checkpoints written beside and renamed, a damaged checkpoint never chosen, the report and the sweep
summary over damaged files, calc.py's choice of run and its input limits.
"""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import lightning as L
import pytest
import torch

import calc
from analysis.html_report import main as report_main
from analysis.html_report import write_run_report
from analysis.hydra_callbacks import SweepSummary
from analysis.sweep import summarise
from storage.rundir import RunDir, RunDirError, SweepDir, resume_target, write_atomically
from tests.conftest import ROOT
from tests.test_calc import call
from training.callbacks import save_checkpoint

# ---- writes that a crash cannot leave half done ----------------------------------------------------------------


def test_write_atomically_writes_beside_flushes_and_renames(tmp_path, monkeypatch):
    target = tmp_path / "run" / "checkpoints" / "best.ckpt"
    seen = {}
    real_replace, real_fsync = os.replace, os.fsync
    monkeypatch.setattr(os, "replace", lambda a, b: (seen.setdefault("tmp", Path(a)), real_replace(a, b))[1])
    monkeypatch.setattr(os, "fsync", lambda fd: (seen.setdefault("fsyncs", []).append(fd), real_fsync(fd))[1])
    write_atomically(target, lambda tmp: tmp.write_bytes(b"new"))
    assert target.read_bytes() == b"new"
    assert seen["tmp"].parent == target.parent  # same directory: the rename is never a copy
    assert len(seen["fsyncs"]) >= 1
    assert [p.name for p in target.parent.iterdir()] == ["best.ckpt"]  # no temporary file left


def test_a_full_disk_keeps_the_old_file_and_names_the_run_directory(tmp_path):
    target = tmp_path / "interrupted.ckpt"
    target.write_bytes(b"old")

    def full(tmp: Path):
        tmp.write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as caught:
        write_atomically(target, full)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["interrupted.ckpt"]


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.fixture(scope="module")
def trainer() -> L.Trainer:
    trainer = L.Trainer(
        max_steps=1, logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Tiny(), train_dataloaders=torch.utils.data.DataLoader(torch.ones(4, 2), batch_size=2))
    return trainer


def test_our_callbacks_checkpoints_are_whole_or_the_old_one(tmp_path, trainer, monkeypatch):
    path = tmp_path / "checkpoints" / "interrupted.ckpt"
    save_checkpoint(trainer, path)
    first = path.read_bytes()
    data = torch.load(path, map_location="cpu", weights_only=True)
    assert set(data["state_dict"]) == {"layer.weight", "layer.bias"} and data["global_step"] == 1

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(OSError) as caught:
        save_checkpoint(trainer, path)
    assert caught.value.filename == str(path)  # not a temporary path elsewhere
    assert path.read_bytes() == first and [p.name for p in path.parent.iterdir()] == ["interrupted.ckpt"]


class Disturb(L.Callback):
    """At step ``at``: a Ctrl-C (SIGINT) to this process (GracefulStop saves interrupted.ckpt), or a NaN weight (the
    loss turns NaN: FiniteLossGuard saves last-good.ckpt); ``save_to``: a checkpoint torch.save writes directly."""

    def __init__(self, at: int, nan: bool = False, save_to: Path | None = None):
        self.at, self.nan, self.save_to = at, nan, save_to

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step != self.at:
            return
        if self.nan:
            with torch.no_grad():
                next(pl_module.parameters()).fill_(float("nan"))
            return
        if self.save_to is not None:
            torch.save(pl_module.state_dict(), self.save_to)
        os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C during the step


def checkpoints_off_the_crash_safe_path(run_dir: Path, disturb: Disturb, monkeypatch) -> list[str]:
    """A short run built as train.py builds it (validation every 2 steps: best.ckpt), disturbed by ``disturb``: ->
    each checkpoint file it left that did not go through write_atomically, and each torch.save straight into a file."""
    import training.callbacks
    from tests.conftest import SMALL_TASK, compose_config, with_run_dir
    from training.assemble import assemble

    through, straight = set(), []
    real_write, real_save = training.callbacks.write_atomically, torch.save

    def write_atomically(path, write):
        through.add(Path(path).resolve())
        return real_write(path, write)

    def save(obj, f, *args, **kwargs):
        if isinstance(f, (str, os.PathLike)):
            straight.append(f"torch.save into {f}")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(training.callbacks, "write_atomically", write_atomically)
    monkeypatch.setattr(torch, "save", save)
    overrides = [*SMALL_TASK, "logger=none", "analysis=none", "trainer.max_steps=6", "trainer.val_check_interval=2"]
    datamodule, module, _, _, _, trainer = assemble(with_run_dir(compose_config(overrides), run_dir))
    trainer.callbacks.append(disturb)
    try:
        trainer.fit(module, datamodule=datamodule)
    except Exception as e:  # noqa: BLE001 -- the NaN run ends with NonFiniteLossError, as it should
        assert "not finite" in str(e) or "nan" in str(e).lower(), e
    left = {p.resolve() for p in run_dir.rglob("*.ckpt")}
    assert left, "the run wrote no checkpoint"
    return sorted(str(p.relative_to(run_dir.resolve())) for p in left - through) + straight


def test_every_checkpoint_the_run_writes_goes_through_the_crash_safe_path(tmp_path, monkeypatch):
    """The trainer train.py builds writes every checkpoint through write_atomically (AtomicCheckpointIO): Lightning's
    own best.ckpt saves, GracefulStop's interrupted.ckpt and FiniteLossGuard's last-good.ckpt -- each route run."""
    stopped, nan = RunDir(tmp_path / "stopped"), RunDir(tmp_path / "nan")
    assert checkpoints_off_the_crash_safe_path(stopped.path, Disturb(at=3), monkeypatch) == []
    assert checkpoints_off_the_crash_safe_path(nan.path, Disturb(at=3, nan=True), monkeypatch) == []
    assert stopped.best_checkpoint.is_file() and stopped.interrupted_checkpoint.is_file()
    assert nan.last_good_checkpoint.is_file()


def test_the_crash_safe_check_sees_a_checkpoint_written_another_way(tmp_path, monkeypatch):
    """The guard can fail: with AtomicCheckpointIO writing as Lightning's own IO does (open the file, write into
    it) and a callback calling torch.save on a path, the same run is reported, file by file."""
    from lightning.pytorch.plugins.io import TorchCheckpointIO

    from training.callbacks import AtomicCheckpointIO

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", TorchCheckpointIO.save_checkpoint)
    run = tmp_path / "run"
    found = checkpoints_off_the_crash_safe_path(run, Disturb(at=3, save_to=tmp_path / "run" / "raw.ckpt"), monkeypatch)
    assert found == [
        "checkpoints/best.ckpt", "checkpoints/interrupted.ckpt", "raw.ckpt", f"torch.save into {run / 'raw.ckpt'}"
    ]  # fmt: skip


# ---- a checkpoint that cannot be read is never chosen ----------------------------------------------------------


def interrupted_run(path: Path) -> RunDir:
    run = RunDir(path)
    run.checkpoints.mkdir(parents=True)
    torch.save({"state_dict": {"w": torch.ones(1)}}, run.best_checkpoint)
    run.write_results({"status": "interrupted"})
    return run


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_a_damaged_interrupted_checkpoint_is_refused_and_best_offered(tmp_path, damage):
    run = interrupted_run(tmp_path / "run")
    good = io.BytesIO()
    torch.save({"state_dict": {"w": torch.ones(1000)}}, good)
    content = {"empty": b"", "truncated": good.getvalue()[:200], "garbage": b"\x00" * 100}[damage]
    run.interrupted_checkpoint.write_bytes(content)
    with pytest.raises(RunDirError) as caught:
        run.resume_checkpoint()
    message = str(caught.value)
    assert (
        "\n" not in message
        and "checkpoint interrupted.ckpt is" in message
        and f"resume={run.best_checkpoint}" in message
    )
    with pytest.raises(RunDirError, match=f"resume={run.best_checkpoint}"):
        resume_target(run.interrupted_checkpoint)
    assert resume_target(run.best_checkpoint) == run.best_checkpoint


def test_a_readable_interrupted_checkpoint_is_chosen(tmp_path):
    run = interrupted_run(tmp_path / "run")
    torch.save({"state_dict": {}}, run.interrupted_checkpoint)
    assert run.resume_checkpoint() == run.interrupted_checkpoint == resume_target(run.path)


def test_no_readable_checkpoint_at_all_says_so(tmp_path):
    run = interrupted_run(tmp_path / "run")
    run.interrupted_checkpoint.write_bytes(b"")
    run.best_checkpoint.write_bytes(b"")
    with pytest.raises(RunDirError, match="no readable best.ckpt"):
        run.resume_checkpoint()


# ---- the report and the sweep summary over damaged files --------------------------------------------------------


def report(path: Path, capsys) -> subprocess.CompletedProcess:
    """python -m analysis.html_report PATH, in this process (its main)."""
    capsys.readouterr()
    code = report_main([str(path)])
    out = capsys.readouterr()
    return subprocess.CompletedProcess([], code, out.out, out.err)


def failed_run(path: Path) -> RunDir:
    run = RunDir(path)
    path.mkdir(parents=True)
    run.write_results({"status": "failed", "error": "n_heads=3 does not divide 64"})
    return run


@pytest.mark.parametrize(
    "name,content,needle",
    [
        ("results.json", "[]", "results.json: not a JSON object (list)"),
        ("results.json", '{"status": "ok", "te', "results.json: unreadable"),
        ("config.yaml", "model: [1, 2\n  n_heads: :\n", "config.yaml: not valid YAML"),
        ("config.yaml", "- a list\n", "config.yaml: not a mapping"),
        ("history.json", '{"val": 3}', "history.json: its 'val' is not a list"),
        ("analysis.json", "null", "analysis.json: not a JSON object"),
        ("test_mistakes.json", "[1, 2]", "test_mistakes.json: not a JSON object"),
        ("attention/final.json", '{"weights": 1}', "final.json: not an attention maps file"),
    ],
)
def test_the_report_renders_what_is_readable_and_names_each_damaged_file(tmp_path, capsys, name, content, needle):
    run = failed_run(tmp_path / "run")
    (run.path / name).parent.mkdir(parents=True, exist_ok=True)
    (run.path / name).write_text(content)
    done = report(run.path, capsys)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: ") and needle in lines[0], lines
    assert run.report.stat().st_size > 1000 and done.stdout.strip() == str(run.report)


def test_an_over_long_truth_text_is_named_and_clipped(tmp_path, capsys):
    run = failed_run(tmp_path / "run")
    run.write_results({"status": "ok", "data": {"digits": 2, "operators": "+"}, "test_exact_match": 0.5})
    mistakes = [{"problem": "1+2", "model": 4, "model_text": "40", "truth": 3, "truth_text": "3" * 100_000}]
    run.mistakes.write_text(json.dumps({"n_test": 10, "n_mistakes": 1, "mistakes": mistakes}))
    done = report(run.path, capsys)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"warning: {run.mistakes}: ")
    assert run.report.stat().st_size < 1_000_000  # the 100,000 characters are not on the page


def sweep_job(sweep: Path, name: str, status: str | None = "ok", files: dict[str, str] | None = None) -> RunDir:
    job = RunDir(sweep / name)
    (job.path / ".hydra").mkdir(parents=True)
    (job.path / ".hydra" / "overrides.yaml").write_text(f"- model.n_heads={len(name)}\n- seed=0\n")
    (job.path / ".hydra" / "config.yaml").write_text("seed: 0\nmodel:\n  n_heads: 2\n  d_model: 64\n")
    if status is not None:
        record = {"status": status, "test_exact_match": 0.9, "n_params": 1000, "train_seconds": 3.0}
        job.write_results(record if status == "ok" else {"status": status, "error": "boom"})
    job.history.write_text(json.dumps({"val": [{"step": 50, "exact_match": 0.995}]}))
    for rel, text in (files or {}).items():
        (job.path / rel).write_text(text)
    return job


def test_the_sweep_summary_counts_damaged_nested_unfinished_and_refused_jobs(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    sweep_job(sweep, "0_a")
    sweep_job(sweep, "1_b", files={"results.json": "[]"})  # damaged results
    sweep_job(sweep, "2_c", files={".hydra/config.yaml": "model: [\n"})  # damaged config
    sweep_job(sweep, "3_d=x/y")  # a swept value with '/': a nested job directory
    sweep_job(sweep, "4_e", status="running")  # killed (no live owner)
    sweep_job(sweep, "5_f", status=None)  # no results at all (refused before it wrote any)
    assert len(SweepDir(sweep).jobs()) == 6

    class Config:
        class hydra:
            class sweep:
                dir = str(sweep)

    SweepSummary().on_multirun_end(Config)
    out = capsys.readouterr()
    assert "(6 runs, 4 failed)" in out.out and (sweep / "sweep_report.html").exists()
    warnings_ = out.err.strip().splitlines()
    assert len(warnings_) == 2 and all(w.startswith("warning: ") for w in warnings_)
    assert "1_b/results.json: not a mapping" in warnings_[0] and "2_c/.hydra/config.yaml: unreadable" in warnings_[1]
    rows = summarise(SweepDir(sweep))
    assert [r["status"].split(":")[0] for r in rows] == ["ok", "failed", "failed", "ok", "failed", "failed"]
    assert "did not finish" in rows[4]["status"] and "no results.json" in rows[5]["status"]
    assert "3_d=x/y/report.html" in (sweep / "sweep_report.html").read_text()

    done = report(sweep, capsys)  # the command, on the same damaged sweep
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 2


@contextmanager
def held_by_another_process(run: RunDir):
    """Within the block, another live process holds ``run`` (its lock); yields that process."""
    owner = subprocess.Popen(
        [sys.executable, "-c", f"from storage.rundir import RunDir; RunDir({str(run.path)!r}).claim(True); input()"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 30
        while run.owner() is None and time.time() < deadline:
            time.sleep(0.05)
        yield owner
    finally:
        owner.kill()
        owner.wait()


def test_a_job_still_training_counts_as_failed(tmp_path):
    sweep = tmp_path / "sweep"
    job = sweep_job(sweep, "0_a", status="running")
    with held_by_another_process(job) as owner:
        (row,) = summarise(SweepDir(sweep))
        assert row["status"] == f"failed: still running (pid {owner.pid})"


def test_write_run_report_warns_but_never_raises_on_damage(tmp_path, capsys):
    run = failed_run(tmp_path / "run")
    run.history.write_text("\xff not json")
    write_run_report(run.path)
    assert capsys.readouterr().err.count("warning: ") == 1


def test_report_main_still_refuses_what_is_no_run(tmp_path, capsys):
    assert report_main([str(tmp_path)]) == 1


# ---- which model answers ---------------------------------------------------------------------------------------


def project_with_runs(tmp_path: Path, run_add: Path) -> tuple[Path, list[RunDir]]:
    good = (run_add / "checkpoints" / "best.ckpt").read_bytes()
    runs = []
    for i, (name, status) in enumerate([("runs/old", "ok"), ("multirun/s/0_a", "running"), ("multirun/s/1_b", None)]):
        run = RunDir(tmp_path / name)
        run.checkpoints.mkdir(parents=True)
        run.best_checkpoint.write_bytes(good)
        if status is not None:
            run.write_results({"status": status, "test_exact_match": 0.875})
        os.utime(run.best_checkpoint, (1_000_000 + i, 1_000_000 + i))
        runs.append(run)
    return tmp_path, runs


def test_calc_answers_with_the_newest_finished_run_and_says_so(capsys, monkeypatch, tmp_path, run_add):
    root, runs = project_with_runs(tmp_path, run_add)
    monkeypatch.chdir(root)
    status, lines, err = call(capsys, "1+2")
    assert status == 0 and len(lines) == 1 and lines[0].isdigit()  # stdout keeps its format
    first = err.splitlines()[0]
    assert first.startswith("checkpoint: runs/old/checkpoints/best.ckpt (newest finished run of 3;")
    assert "test exact-match 87.50%" in first
    assert "skipped 2 newer run(s) that did not finish" in err


def test_a_nested_sweep_job_is_found(tmp_path, run_add):
    from model.checkpoint import find_checkpoints, newest_checkpoint

    job = sweep_job(tmp_path / "multirun" / "s", "0_data.file=a/b")  # a swept value with '/'
    job.checkpoints.mkdir()
    job.best_checkpoint.write_bytes((run_add / "checkpoints" / "best.ckpt").read_bytes())
    assert find_checkpoints(tmp_path) == [job.best_checkpoint] == [newest_checkpoint(tmp_path)]


def test_without_a_finished_run_the_newest_answers_with_a_warning(capsys, monkeypatch, tmp_path, run_add):
    root, runs = project_with_runs(tmp_path, run_add)
    runs[0].write_results({"status": "running"})
    monkeypatch.chdir(root)
    status, _, err = call(capsys, "1+2")
    assert status == 0 and "none finished" in err and "test exact-match not recorded" in err


def test_export_refuses_a_run_still_training(capsys, tmp_path, run_add):
    run = RunDir(tmp_path / "live")
    run.checkpoints.mkdir(parents=True)
    run.best_checkpoint.write_bytes((run_add / "checkpoints" / "best.ckpt").read_bytes())
    with held_by_another_process(run) as owner:
        status, lines, err = call(capsys, "--ckpt", str(run.path), "--export", "hf", str(tmp_path / "out"))
        assert status == 2 and lines == []
        assert [line for line in err.splitlines() if line.startswith("error:")] == [
            f"error: {run.path} is still training (pid {owner.pid}); export it when it has finished"
        ]
        assert not (tmp_path / "out").exists()


# ---- input limits ----------------------------------------------------------------------------------------------


def test_lines_are_streamed_and_an_over_long_one_is_cut(monkeypatch):
    long = "1" * (calc.MAX_LINE_CHARS + 1)
    lines = list(calc.input_lines(io.BytesIO(f"1+2\n{long}\n3+4\r\nlast".encode())))
    assert lines[0] == "1+2" and lines[2:] == ["3+4", "last"]
    assert isinstance(lines[1], calc.LongLine) and len(lines[1]) == calc.MAX_SHOWN


def test_too_many_lines_or_bytes_stop_with_one_line(monkeypatch):
    monkeypatch.setattr(calc, "MAX_LINES", 3)
    with pytest.raises(calc.InputTooLarge, match="more than 3 lines"):
        list(calc.input_lines(io.BytesIO(b"1+2\n" * 10)))
    monkeypatch.setattr(calc, "MAX_INPUT_BYTES", 1 << 20)

    class Zeros(io.RawIOBase):  # /dev/zero: endless, no newline
        def readline(self, limit=-1):
            return b"\0" * limit

    with pytest.raises(calc.InputTooLarge, match="more than 1 MiB"):
        list(calc.input_lines(Zeros()))


def test_stdin_beyond_the_limit_answers_what_came_before_then_one_error_line(capsys, monkeypatch, run_add):
    monkeypatch.setattr(calc, "MAX_LINES", 5)
    monkeypatch.setattr(calc, "BATCH", 2)
    monkeypatch.setattr(sys, "stdin", io.StringIO("1+2\n" * 20))
    status, lines, err = call(capsys, "--ckpt", str(run_add))
    assert status == 2 and len(lines) == 4  # two whole batches answered before the sixth line was read
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        "error: stdin: more than 5 lines (the limit); split the input into smaller pieces; the lines before were "
        "answered"
    ]


def test_an_over_long_stdin_line_is_one_error_line_in_its_place(capsys, monkeypatch, run_add):
    monkeypatch.setattr(sys, "stdin", io.StringIO("1+2\n" + "9" * 100_000 + "\n3+4\n"))
    status, lines, _ = call(capsys, "--ckpt", str(run_add))
    assert status == 1 and len(lines) == 3 and lines[1].startswith("error: '999") and "longer than 50,000" in lines[1]
    assert len(lines[1]) < 200


def test_eval_of_dev_zero_is_one_error_line(run_add):
    done = subprocess.run(
        [sys.executable, str(ROOT / "calc.py"), "--ckpt", str(run_add), "--eval", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("error:")] == [
        "error: --eval /dev/zero: more than 64 MiB (the limit); split the input into smaller pieces"
    ]


def test_eval_json_echoes_only_the_start_of_an_invalid_line(capsys, tmp_path, run_add):
    problems = tmp_path / "p.txt"
    problems.write_text("1+2=3\n" + "x" * 1_000_000 + "\n" + "y" * 500 + "\n")
    status, lines, _ = call(capsys, "--ckpt", str(run_add), "--eval", str(problems), "--json")
    result = json.loads("\n".join(lines))
    assert status == 1 and result["n_problems"] == 1 and result["n_invalid"] == 2  # invalid lines: exit 1
    assert [bad["line"] for bad in result["invalid"]] == [2, 3]
    assert all(len(bad["text"]) <= calc.MAX_SHOWN + 3 for bad in result["invalid"])
    assert f"longer than {calc.MAX_LINE_CHARS:,} characters" in result["invalid"][0]["error"]


# ---- for real ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.13, 0.31])
def test_kill_9_while_training_writes_checkpoints_leaves_only_loadable_ones(tmp_path, delay):
    """A real training writing best.ckpt every 5 steps, killed with SIGKILL at some moment after the first: every
    checkpoint file left loads, and resume= offers one that does."""
    from tests.conftest import SMALL_TASK, kill_once_checkpointed

    run = RunDir(tmp_path / "run")
    quick = ["trainer.val_check_interval=5", "trainer.max_steps=5000", "target_accuracy=null", "logger=none"]
    kill_once_checkpointed(run, *SMALL_TASK, *quick, "analysis=none", "callbacks.attention_maps=null", wait=delay)
    for ckpt in run.checkpoints.glob("*.ckpt"):
        assert "state_dict" in torch.load(ckpt, map_location="cpu", weights_only=True), ckpt
    with pytest.raises(RunDirError, match=f"resume={run.best_checkpoint}"):
        run.resume_checkpoint()
