"""A refused command writes nothing anywhere: ``resume=`` of every kind of folder that is not a run to continue.

Each target sits in a small world of folders (the command's working directory among them, where runs/ would go);
the whole world -- every path, its kind, its bytes, its mode and its mtime, folders included -- is the same before
and after the refusal, which is one ``error:`` line and exit status 2. In-process for every row (the check
train.py makes before Hydra starts: Hydra is never reached), through ``python train.py`` for a sample (fast) and
for every row (slow). A newcomer's mistakes -- a key without its group, a space inside an override -- are one line
that shows the way to write it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT
from training.cli import check_command_line


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` (itself included): its kind, mode, mtime and, for a file, its bytes' hash."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        for name in ["", *dirs, *files]:
            path = Path(folder) / name
            info = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(info.st_mode) else None
            seen[str(path.relative_to(root))] = (stat.S_IFMT(info.st_mode), info.st_mode, info.st_mtime_ns, digest)
    return seen


def a_run(path: Path, status: str, checkpoint: bytes | None = None) -> Path:
    """A run directory as train.py leaves one: config, Hydra's files, a record, a best checkpoint; ``checkpoint``
    (bytes) as its interrupted.ckpt."""
    (path / "checkpoints").mkdir(parents=True)
    torch.save({"state_dict": {}}, path / "checkpoints" / "best.ckpt")
    (path / "config.yaml").write_text("seed: 0\n")
    (path / ".hydra").mkdir()
    (path / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
    (path / "results.json").write_text(f'{{"status": "{status}", "train_seconds": 1.0}}\n')
    if checkpoint is not None:
        (path / "checkpoints" / "interrupted.ckpt").write_bytes(checkpoint)
    return path


def not_a_calculator() -> bytes:
    """A checkpoint that loads (a state_dict) but holds no calculator."""
    import io

    buffer = io.BytesIO()
    torch.save({"state_dict": {}}, buffer)
    return buffer.getvalue()


def build_world(world: Path) -> dict[str, str]:
    """The folders the table's targets name, each as resume= is given it (relative ones from ``world/cwd``)."""
    (world / "cwd").mkdir(parents=True)
    (world / "cwd" / "notes.md").write_text("the user's own file\n")
    (world / "empty").mkdir()
    (world / "papers").mkdir()
    (world / "papers" / "draft.txt").write_text("not a run\n")
    etc = world / "etc"  # like /etc: files, and a folder nobody but root may write
    (etc / "ssl").mkdir(parents=True)
    (etc / "hostname").write_text("tinycalc\n")
    (etc / "ssl" / "openssl.cnf").write_text("[req]\n")
    sweep = world / "multirun" / "2026-01-01" / "12-00-00"  # a sweep: its jobs are runs, it is not one
    a_run(sweep / "0_seed=1", "ok")
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    interrupted = a_run(world / "runs" / "interrupted", "interrupted")  # no interrupted.ckpt: not resumable as is
    damaged = a_run(world / "runs" / "damaged", "interrupted", checkpoint=b"\x00" * 100)
    foreign = a_run(world / "runs" / "foreign", "interrupted", checkpoint=not_a_calculator())
    (world / "file.txt").write_text("a file\n")
    torch.save({"state_dict": {}}, world / "loose.ckpt")
    for folder in (etc / "ssl", etc):
        folder.chmod(0o555)
    return {
        "empty": str(world / "empty"),
        "not_a_run": str(world / "papers"),
        "etc_like": str(etc),
        "project_root_empty": "''",  # resume='' : the working directory, once
        "project_root_dot": ".",
        "sweep": str(sweep),
        "checkpoints": str(interrupted / "checkpoints"),
        "file": str(world / "file.txt"),
        "missing": str(world / "missing" / "run"),
        "damaged_run": str(damaged),
        "foreign_checkpoint": str(foreign),
        "loose_checkpoint": str(world / "loose.ckpt"),
    }


TARGETS = [  # (the target, what its one line must say)
    ("empty", "no checkpoints/interrupted.ckpt there"),
    ("not_a_run", "no checkpoints/interrupted.ckpt there"),
    ("etc_like", "no checkpoints/interrupted.ckpt there"),
    ("project_root_empty", "resume= is empty"),
    ("project_root_dot", "resume=.: no checkpoints/interrupted.ckpt there"),
    ("sweep", "no checkpoints/interrupted.ckpt there"),
    ("checkpoints", "the run is the folder above it: resume="),
    ("file", "not a .ckpt file or run directory"),
    ("missing", "no such run directory or .ckpt file"),
    ("damaged_run", "interrupted.ckpt is truncated or corrupt"),
    ("foreign_checkpoint", "interrupted.ckpt: not a tinycalc checkpoint"),
    ("loose_checkpoint", "is not inside a run directory with its config.yaml"),
]


@pytest.fixture
def world(tmp_path):
    targets = build_world(tmp_path / "world")
    yield tmp_path / "world", targets
    for folder, dirs, _ in os.walk(tmp_path / "world"):  # let pytest clean up the read-only folders
        for name in dirs:
            (Path(folder) / name).chmod(0o755)


@pytest.mark.parametrize("target,needle", TARGETS, ids=[t for t, _ in TARGETS])
def test_a_refused_resume_leaves_every_folder_as_it_was(target, needle, world, monkeypatch, capsys):
    """The check train.py makes before Hydra starts refuses each target: one line, exit 2, the world unchanged."""
    root, targets = world
    monkeypatch.chdir(root / "cwd")
    before = snapshot(root)
    with pytest.raises(SystemExit) as stopped:
        check_command_line([f"resume={targets[target]}"], claim=True)
    lines = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert needle in lines[0], lines
    assert snapshot(root) == before


@pytest.mark.parametrize("first", ["empty", "null"])
def test_resume_is_refused_in_a_multirun_before_anything_is_written(first, world, monkeypatch, capsys):
    root, targets = world
    monkeypatch.chdir(root / "cwd")
    before = snapshot(root)
    with pytest.raises(SystemExit) as stopped:
        check_command_line(["-m", f"resume={targets.get(first, first)},{targets['damaged_run']}"], claim=True)
    lines = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and lines == [
        "error: resume= continues one run; it cannot be part of a multirun (drop -m)"
    ]
    assert snapshot(root) == before


def train_py(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline"}
    command = [sys.executable, str(ROOT / "train.py"), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


SAMPLE = ("empty", "project_root_empty", "checkpoints")


@pytest.mark.parametrize(
    "target,needle",
    [pytest.param(*row, marks=() if row[0] in SAMPLE else pytest.mark.slow) for row in TARGETS],
    ids=[t for t, _ in TARGETS],
)
def test_through_train_py_a_refused_resume_writes_nothing(target, needle, world):
    """What a user sees: one line, exit 2, and nothing written by the project or by Hydra (no .hydra-resume/ in
    the target, no runs/ in the working directory, an empty folder not deleted)."""
    root, targets = world
    before = snapshot(root)
    done = train_py(root / "cwd", f"resume={targets[target]}")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and needle in lines[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert snapshot(root) == before


def test_through_train_py_a_multirun_of_resumes_is_refused_whole(world):
    root, targets = world
    before = snapshot(root)
    done = train_py(root / "cwd", "-m", f"resume={targets['empty']},{targets['not_a_run']}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "error: resume= continues one run; it cannot be part of a multirun (drop -m)"
    assert snapshot(root) == before


@pytest.mark.parametrize("value", ["model.n_heads=3", "data.digits=0", "logger.wandb.project=a/b"])
def test_a_value_an_object_refuses_is_refused_before_anything_is_written(value, tmp_path, capsys):
    """The objects' own rules (the model's heads, the data's digits, wandb's names) are asked before Hydra starts:
    a folder of the user's given as hydra.run.dir stays exactly as it was, mtime and all."""
    mine = tmp_path / "mine"
    mine.mkdir()
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        check_command_line([f"hydra.run.dir={mine}", value], claim=True)
    lines = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and len(lines) == 1 and value.split("=")[0] in lines[0], lines
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "value",
    ["+trainer.enable_progress_bar=false", "+trainer.gradient_clip_algorithm=sideways", "trainer.precision=99"],
)
def test_a_value_only_the_trainer_refuses_is_refused_before_anything_is_written(value, tmp_path, capsys):
    """Lightning's own rules (a progress bar turned off beside the project's, an algorithm it does not know) are
    asked too, by building the trainer before Hydra starts: the user's folder stays exactly as it was, mtime and
    all, and the check prints nothing but its one line (not Lightning's hardware banner)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        check_command_line([f"hydra.run.dir={mine}", value, "logger=none"], claim=True)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert stopped.value.code == 2 and len(lines) == 1 and lines[0].startswith(("error: trainer", "error: +trainer")), (
        lines
    )
    assert out == "" and snapshot(tmp_path) == before


def test_through_train_py_a_value_only_the_trainer_refuses_writes_nothing(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    before = snapshot(tmp_path)
    done = train_py(tmp_path, f"hydra.run.dir={mine}", "+trainer.enable_progress_bar=false", "logger=none")
    assert done.returncode == 2 and "enable_progress_bar=False" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and snapshot(tmp_path) == before


def test_every_value_a_multirun_sweeps_is_composed_before_any_job_runs(tmp_path, capsys):
    """An option or interpolation that cannot compose, in a later place of a sweep, refuses the sweep before
    anything runs (Hydra stopped the sweep there, after the jobs before it had trained); a value out of range is its
    own job's to refuse, and fails alone (tests/test_sweep.py)."""
    sweep = tmp_path / "sweep"
    for swept, needle in (("model=calculator,calcuator", "did you mean calculator"), ("seed=1,${nope}", "seed")):
        with pytest.raises(SystemExit) as stopped:
            check_command_line(["-m", f"hydra.sweep.dir={sweep}", swept], claim=True)
        lines = capsys.readouterr().err.strip().splitlines()
        assert stopped.value.code == 2 and len(lines) == 1 and needle in lines[0], lines
    assert not sweep.exists()
    assert check_command_line(["-m", f"hydra.sweep.dir={sweep}", "model.n_heads=3,2"]) is None  # each job's own


# ---- a newcomer's mistakes ---------------------------------------------------------------------------------
MISTAKES = [  # (the arguments, what the one line must say)
    (["n_heads=8"], "n_heads is not a setting (did you mean model.n_heads?)"),
    (["n_head=8"], "(did you mean model.n_heads?)"),
    (["digits=4"], "(did you mean data.digits?)"),
    (["seeed=1"], "did you mean seed"),
    (
        ["-m", "model.n_heads=1,", "2"],
        "model.n_heads=1, 2: a space splits one override into 2 arguments; write model.n_heads=1,2 (no spaces",
    ),
    (["model.n_heads=", "2"], "write model.n_heads=2 (no spaces"),
    (["-m", "model.n_heads=1", ",2"], "write model.n_heads=1,2"),
    (["model.n_heads=1,", "2,", "4"], "splits one override into 3 arguments; write model.n_heads=1,2,4"),
    (["seed=(1"], "seed=(1: Hydra cannot read this override (extraneous input '('); write key=value"),
    (["8"], "8: not an override; write key=value"),
]


@pytest.mark.parametrize("argv,needle", MISTAKES, ids=[" ".join(a) for a, _ in MISTAKES])
def test_a_newcomer_s_mistake_is_one_line_showing_the_way_to_write_it(argv, needle, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        check_command_line([*argv, f"hydra.run.dir={tmp_path / 'run'}"], claim=True)
    lines = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and len(lines) == 1 and needle in lines[0], lines
    assert "expecting" not in lines[0] and "<EOF>" not in lines[0]  # not the grammar's own words
    assert not (tmp_path / "run").exists()


def test_the_way_shown_is_one_the_command_line_takes(tmp_path):
    """Each override the lines above offer is read by the same check without a word."""
    for argv in (["model.n_heads=8"], ["-m", "model.n_heads=1,2"], ["model.n_heads=2"], ["-m", "model.n_heads=1,2,4"]):
        check_command_line([*argv, f"hydra.run.dir={tmp_path / 'run'}"])


def test_through_train_py_a_key_without_its_group_and_a_split_override(tmp_path):
    done = train_py(tmp_path, "n_heads=8")
    assert done.returncode == 2 and done.stderr.strip().startswith(
        "error: n_heads is not a setting (did you mean model.n_heads?)"
    ), done.stderr
    done = train_py(tmp_path, "-m", "model.n_heads=1,", "2")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "write model.n_heads=1,2" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # no runs/, no multirun/


# ---- a sweep's exit status says what happened --------------------------------------------------------------
def test_a_sweep_exits_3_when_none_of_its_jobs_ended_ok_and_0_when_one_did(tmp_path):
    from training.cli import exit_status

    sweep = tmp_path / "sweep"
    a_run(sweep / "0_seed=1", "failed")
    a_run(sweep / "1_seed=2", "failed")
    argv = ["-m", "seed=1,2", f"hydra.sweep.dir={sweep}"]
    assert exit_status(argv) == 3
    (sweep / "1_seed=2" / "results.json").write_text('{"status": "ok"}\n')
    assert exit_status(argv) == 0
    assert exit_status(["seed=1"]) == 0  # one run: its failure exits as it happens


def test_through_train_py_a_sweep_whose_jobs_are_all_refused_says_so(tmp_path):
    """Both jobs pass the command line's check and are refused as the trainer is built: each is counted as failed,
    and the command exits 3 (a sweep of resume= used to end "(0 runs, 0 failed)", exit 0)."""
    from tests.conftest import run_sweep

    done = run_sweep(tmp_path, "seed=1,2", "+trainer.enable_progress_bar=false")
    assert done.returncode == 3, done.stderr[-2000:]
    assert "(2 runs, 2 failed)" in done.stdout and "Traceback" not in done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 2 and all("enable_progress_bar=False" in line for line in errors), errors


def test_a_run_that_never_began_takes_away_only_what_its_claim_made(tmp_path):
    """In-process, the rule behind the commands above (storage/rundir.py: discard_if_unused)."""
    from storage.rundir import RunDir

    users = RunDir(tmp_path / "users")  # a folder of the user's, with a file and Hydra's folder of an earlier try
    (users.path / ".hydra").mkdir(parents=True)
    (users.path / ".hydra" / "config.yaml").write_text("seed: 0\n")
    users.claim(resuming=False)
    (users.path / ".hydra-resume").mkdir()  # what Hydra wrote after the claim
    users.release()
    users.discard_if_unused()
    assert sorted(p.name for p in users.path.iterdir()) == [".hydra"]  # the earlier one is not this command's
    assert (users.path / ".hydra" / "config.yaml").read_text() == "seed: 0\n"

    made = RunDir(tmp_path / "a" / "b" / "run")  # the claim makes all three
    made.claim(resuming=False)
    (made.path / ".hydra").mkdir()
    made.release()
    made.discard_if_unused()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users"]

    never = RunDir(tmp_path / "never")  # not claimed by this process: never touched
    (never.path / ".hydra").mkdir(parents=True)
    never.discard_if_unused()
    assert (never.path / ".hydra").is_dir()
