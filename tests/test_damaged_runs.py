"""A table of damaged run directories (issue 40, classes 5, 7 and 8): every file a run holds x every way it can be
wrong, through every reader of a run directory -- calc.py's answer, verify.py, analyse.py, the report, resume's
reader -- in this process. None may hang (each is stopped after a few seconds), none may raise (a traceback), and
each either goes on (the report: the damaged section "not recorded", the file named in one warning) or says one
``error:`` line. Also: the search for runs stays inside runs/ and multirun/, no write goes through a link, and the
one-line refusals of class 8 (an unwritable run directory, a run.lock that is a directory, verify.py --device xla).

One real run is trained once for the module (30 steps, one thread) and copied per case.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import analyse
import calc
import verify
from analysis import html_report
from analysis.pipeline import HeadAnalysis
from data.tokenizer import CharTokenizer
from storage import rundir
from storage.rundir import MAX_CHECKPOINT_BYTES, MAX_FILE_BYTES, RunDir, RunDirError
from tests.conftest import ROOT
from training.config import ConfigError
from training.failures import handle_failure
from training.resume import check_results, read_saved_config, saved_choices

PATIENCE = 20  # seconds a reader may take on one damaged directory before it counts as hung


class Hung(BaseException):
    """A reader took longer than PATIENCE: a BaseException, so that no ``except Exception`` of the code swallows it."""


@contextmanager
def no_hang(what: str, seconds: int = PATIENCE):
    """Fail (not hang) when the body takes longer than ``seconds``: a blocking open() of a FIFO is interrupted."""

    def stop(signum, frame):
        raise Hung(f"{what} hung for {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A real run of train.py: every file a finished run holds (~8 s)."""
    run = tmp_path_factory.mktemp("trained") / "run"
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={run}", "trainer.max_steps=30", "threads=1",
         "logger=none", "data.digits=2", "data.val_fraction=0.05", "data.test_fraction=0.05", "data.n_val=100",
         "data.n_test=100", "trainer.val_check_interval=10"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "WANDB_MODE": "offline"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return run


def copy_of(trained: Path, tmp_path: Path) -> RunDir:
    shutil.copytree(trained, tmp_path / "run", symlinks=True)
    return RunDir(tmp_path / "run")


# ---- the table ------------------------------------------------------------------------------------------------
# every file a finished run holds that a reader reads, and what kind of file it is
FILES = {
    "results.json": "json",
    "history.json": "json",
    "test_mistakes.json": "json",
    "analysis.json": "json",
    "attention/final.json": "json",
    "tokenizer.json": "json",
    "config.yaml": "yaml",
    ".hydra/hydra.yaml": "yaml",
    "ablation.csv": "csv",
    "checkpoints/best.ckpt": "ckpt",
}
WRONG_TYPE = {"json": "[1, 2]", "yaml": "- 1\n- 2\n", "csv": "layer,head,exact_match\nx,y,z\n"}
TOO_DEEP = {"json": "[" * 100_000 + "]" * 100_000, "yaml": "a: " + "[" * 10_000 + "]" * 10_000 + "\n"}
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)  # under 1 KB; 9**9 values once its aliases are expanded


def damage(path: Path, kind: str, how: str, outside: Path) -> None:
    """Make ``path`` (a ``kind`` file) wrong in the way ``how``."""
    if how == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif how == "wrong type":
        if kind == "ckpt":
            torch.save([1, 2], path)
        else:
            path.write_text(WRONG_TYPE[kind])
    elif how == "too deep":
        path.write_text(TOO_DEEP[kind])
    elif how == "alias bomb":
        path.write_text(ALIAS_BOMB)
    elif how == "too big":
        os.truncate(path, (MAX_CHECKPOINT_BYTES if kind == "ckpt" else MAX_FILE_BYTES) + 1)  # sparse: no disk used
    elif how == "a FIFO":
        path.unlink()
        os.mkfifo(path)
    elif how == "a link out":
        target = outside / path.name
        shutil.move(path, target)  # the right content, but outside the run
        path.symlink_to(target)
    elif how == "a directory":
        path.unlink()
        path.mkdir()


DAMAGES = ["truncated", "wrong type", "too deep", "alias bomb", "too big", "a FIFO", "a link out", "a directory"]
ALL_CASES = [
    (name, how)
    for name, kind in FILES.items()
    for how in DAMAGES
    if not (how == "too deep" and kind in ("csv", "ckpt")) and not (how == "alias bomb" and kind != "yaml")
]


def covering(cases: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """A few cases that hold every file once and every damage once (the fast suite's share of the table)."""
    chosen: set[tuple[str, str]] = {("checkpoints/best.ckpt", "too big")}  # the bound before torch.load
    for how in DAMAGES:
        if not any(h == how for _, h in chosen):
            chosen.add(next(c for c in cases if c[1] == how and c[0] not in {n for n, _ in chosen}))
    for name in FILES:
        if not any(n == name for n, _ in chosen):
            chosen.add(next(c for c in cases if c[0] == name))
    return chosen


FAST_CASES = covering(ALL_CASES)
CASES = [  # the rest of the table: slow (a few seconds each, every reader on a copy of the run)
    pytest.param(name, how, id=f"{name} {how}", marks=() if (name, how) in FAST_CASES else pytest.mark.slow)
    for name, how in ALL_CASES
]


def one_error_line(status: int, err: str, ok: tuple[int, ...] = (0,)) -> None:
    """A reader's verdict: it went on (status in ``ok``; stderr only warnings and notes), or said one error line."""
    lines = err.strip().splitlines()
    if status in ok:
        assert all(line.startswith(("warning:", "note:", "checkpoint:")) for line in lines), lines
    else:
        assert status == 2 and [line for line in lines if line.startswith("error:")] == lines[-1:], lines
        assert all(line.startswith(("warning:", "note:", "checkpoint:", "error:")) for line in lines), lines


@pytest.mark.parametrize("name,how", CASES)
def test_every_reader_takes_a_damaged_file_without_hanging_or_a_traceback(
    trained, tmp_path, capsys, monkeypatch, name, how
):
    run = copy_of(trained, tmp_path)
    (tmp_path / "outside").mkdir()
    damage(run.path / name, FILES[name], how, tmp_path / "outside")

    with no_hang("calc.py"):
        status = calc.main(["--ckpt", str(run.path), "11+2"])
    out = capsys.readouterr()
    one_error_line(status, out.err)
    if status == 0:
        assert len(out.out.splitlines()) == 1 and out.out.strip().lstrip("-").isdigit()
    if name == "checkpoints/best.ckpt" and how == "too big":  # refused before torch.load reads a byte of it
        assert status == 2 and "larger than a tinycalc checkpoint may be" in out.err, out.err
    if name == "tokenizer.json" and how in ("wrong type", "too big", "a FIFO", "a link out", "a directory"):
        assert status == 2 and "tokenizer.json" in out.err  # never the built-in vocabulary in its place, silently

    with no_hang("verify.py"):
        status = verify.main([str(run.path)])  # a 2-digit model: at best "not a 10-digit adder", one line
    one_error_line(status, capsys.readouterr().err, ok=())

    with no_hang("the report"):
        status = html_report.main([str(run.path)])
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    if status == 0:
        assert all(line.startswith("warning: ") for line in lines), lines
        refused = how not in ("truncated", "wrong type") and name not in ("tokenizer.json", ".hydra/hydra.yaml")
        if refused and name != "checkpoints/best.ckpt":  # a file the report reads, refused: named, left out
            assert any(str(run.path / name) in line for line in lines), lines
            with no_hang("the report's data"):
                page = html_report.run_data(run.path, damage=html_report.Damage())
            section = {"history.json": page["history"], "test_mistakes.json": page["mistakes"],
                       "attention/final.json": page["attention"], "config.yaml": page["config"],
                       "ablation.csv": [a["rows"] for a in page["analyses"] if a["name"] == "ablation"]}  # fmt: skip
            if name in section and (name != "config.yaml" or how in ("too big", "a FIFO", "a link out", "a directory")):
                assert section[name] in ([], None, [None]), name  # its section says "not recorded"
            # (a config.yaml that is no valid config is still shown as text: the page escapes it)
    else:
        assert status == 1 and len(lines) == 1 and lines[0].startswith("error: "), lines

    monkeypatch.setattr(HeadAnalysis, "run", lambda self, module, test_set, run: {"analysis_summary": []} | SPEEDY)
    with no_hang("analyse.py"):
        status = analyse.main([str(run.path), "--problems", "20"])
    one_error_line(status, capsys.readouterr().err)

    label = f"resume={run.path}"
    for read in (read_saved_config, saved_choices, check_results):
        with no_hang(f"resume's {read.__name__}"):
            try:
                read(run, label)
            except ConfigError as e:
                assert "\n" not in str(e) and str(e).startswith(label)
    with no_hang("resume's reading of results.json"):
        assert isinstance(run.read_results(), dict)
    with no_hang("claiming the directory to resume it"):
        try:
            run.claim(resuming=True)
            run.release()
        except RunDirError as e:
            assert "\n" not in str(e)


SPEEDY = {"analysis_seconds": 0.0}  # the analyses themselves are tested elsewhere: here, what analyse.py reads


@pytest.mark.parametrize("how", ["a directory", "a FIFO", "a link out", "too big", "truncated"])
def test_a_damaged_run_lock_is_one_line_and_never_waited_on(trained, tmp_path, how):
    run = copy_of(trained, tmp_path)
    (tmp_path / "outside").mkdir()
    # a pid no process has, behind zeros: truncated, the lock names pid 0 -- not a prefix of the pid, which can be a
    # live process on a busy machine (1029912 cut to 10299 was one)
    run.lock.write_text(f"{'0' * 20}{os.getpid() + 10**6} 1\n")
    damage(run.lock, "lock", how, tmp_path / "outside")
    with no_hang("run.lock"):
        assert run.owner() is None
        try:
            run.claim(resuming=True)
        except RunDirError as e:
            assert "\n" not in str(e) and "run.lock" in str(e)
            assert os.path.lexists(run.lock)  # not ours to remove
        else:
            run.release()


# ---- class 7: silently wrong ----------------------------------------------------------------------------------
def test_a_tokenizer_with_two_digits_swapped_is_refused_in_one_line(trained, tmp_path, capsys):
    run = copy_of(trained, tmp_path)
    saved = json.loads(run.tokenizer.read_text())
    vocab = saved["model"]["vocab"]
    vocab["3"], vocab["4"] = vocab["4"], vocab["3"]
    run.tokenizer.write_text(json.dumps(saved))
    assert calc.main(["--ckpt", str(run.path), "13+4"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith(f"error: {run.tokenizer}: not the tokenizer tinycalc builds") and "'3', '4'" in out.err


# ---- class 5: every search stays inside the project's folders -------------------------------------------------
def test_the_newest_run_is_searched_for_inside_runs_and_multirun_only(trained, tmp_path, capsys, monkeypatch):
    project, foreign = tmp_path / "project", tmp_path / "foreign"
    shutil.copytree(trained, project / "runs" / "mine")
    shutil.copytree(trained, foreign / "day" / "newest")  # a newer finished run, outside the project
    os.utime(foreign / "day" / "newest" / "checkpoints" / "best.ckpt", (2e9, 2e9))
    (project / "multirun").mkdir()
    (project / "multirun" / "root").symlink_to("/")  # crawled, this took the whole disk
    (project / "multirun" / "foreign").symlink_to(foreign)
    monkeypatch.chdir(project)
    with no_hang("the search for the newest run"):
        assert [run.path for run in RunDir.under(project)] == [project / "runs" / "mine"]
        assert calc.main(["11+2"]) == 0
    assert "checkpoint: runs/mine/checkpoints/best.ckpt" in capsys.readouterr().err


# ---- class 8: no write outside the run, through a link -------------------------------------------------------
@pytest.mark.parametrize("name", ["tokenizer.json", "config.yaml", "error.log", "results.json"])
def test_no_write_goes_through_a_link_out_of_the_run(trained, tmp_path, name):
    run = copy_of(trained, tmp_path)
    elsewhere = tmp_path / "someone_elses_file"
    elsewhere.write_text("precious\n")
    (run.path / name).unlink(missing_ok=True)
    (run.path / name).symlink_to(elsewhere)
    if name == "tokenizer.json":
        run.write_text(run.tokenizer, CharTokenizer().to_json())  # what resume= does
    elif name == "error.log":
        assert handle_failure(RuntimeError("boom"), run, in_sweep=True, started=True) is None
    elif name == "results.json":
        run.mark_running(None, {})
    else:
        run.write_text(run.config, "seed: 1\n")
    assert elsewhere.read_text() == "precious\n"
    assert (run.path / name).is_file() and not (run.path / name).is_symlink()


def test_a_write_over_a_directory_is_one_line(tmp_path):
    (tmp_path / "tokenizer.json").mkdir()
    with pytest.raises(RunDirError, match=r"tokenizer.json: a directory where a run writes a file"):
        RunDir.write_text(tmp_path / "tokenizer.json", CharTokenizer().to_json())


# ---- class 8: one line, exit 2 --------------------------------------------------------------------------------
def unwritable(tmp_path: Path, monkeypatch, where: str) -> Path:
    if where == "/proc":
        return Path("/proc/tinycalc-run")
    if where == "under a file":
        (tmp_path / "a_file").write_text("")
        return tmp_path / "a_file" / "run"
    real_mkdir = Path.mkdir  # a read-only filesystem (none can be mounted here): what the OS says there

    def read_only(self, *args, **kwargs):
        if str(self).startswith(str(tmp_path)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    return tmp_path / "ro" / "run"


@pytest.mark.parametrize("where", ["/proc", "under a file", "a read-only filesystem"])
def test_an_unwritable_run_directory_is_one_line_exit_2(tmp_path, monkeypatch, capsys, where):
    from training.cli import check_command_line

    path = unwritable(tmp_path, monkeypatch, where)
    with pytest.raises(SystemExit) as exit:
        check_command_line([f"hydra.run.dir={path}"], claim=True)
    err = capsys.readouterr().err
    assert exit.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: cannot write the run in {path} (") and "hydra.run.dir" in err


def test_a_run_lock_that_is_a_directory_is_one_line_exit_2(tmp_path, capsys):
    from training.cli import check_command_line

    (tmp_path / "run" / "run.lock").mkdir(parents=True)
    with pytest.raises(SystemExit) as exit:
        check_command_line([f"hydra.run.dir={tmp_path / 'run'}"], claim=True)
    err = capsys.readouterr().err
    assert exit.value.code == 2 and err == f"error: {tmp_path / 'run' / 'run.lock'} is a directory, not the lock " \
        "file a run writes; remove it and start again\n"  # fmt: skip
    assert (tmp_path / "run" / "run.lock").is_dir()


def test_analyse_on_a_read_only_run_says_so_before_analysing(trained, tmp_path, capsys, monkeypatch):
    run = copy_of(trained, tmp_path)
    before = run.results.read_text()

    def read_only(path, write):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    def analysed(*args):
        raise AssertionError("the analysis ran on a directory it cannot write its results to")

    monkeypatch.setattr(rundir, "write_atomically", read_only)
    monkeypatch.setattr(HeadAnalysis, "run", analysed)
    assert analyse.main([str(run.path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: cannot write in {run.path} (Read-only file system); make it writable, or copy the run " \
        "somewhere writable and use the copy\n"  # fmt: skip
    assert run.results.read_text() == before


def test_analyse_on_a_damaged_config_is_one_line(trained, tmp_path, capsys):
    run = copy_of(trained, tmp_path)
    run.config.write_text("data: [1, 2\n")
    assert analyse.main([str(run.path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {run.config}: not valid YAML")


BAD_SETTINGS = {  # a run's config.yaml edited to a value analyse.py cannot use -> what its one line must say
    "analysis.probes=[12/4]": "probes: probe '12/4': this model was not trained on '/'",  # once a traceback
    "analysis.probes=[999+1]": "probe '999+1'",  # wider than the run's 2 digits
    "analysis.probes=[]": "probes=[]",
    "analysis.n_problems=0": "n_problems=0",
    "analysis.tolerance=2": "tolerance=2",
    "analysis.prune=sometimes": "prune='sometimes'",
    "data.seed=100000000000000000000000": "seed=100000000000000000000000: must be a whole number in [0, 4294967295]",
    "data.n_test=0": "n_test=0",
}


@pytest.mark.parametrize("setting", BAD_SETTINGS)
def test_analyse_on_a_config_with_a_bad_setting_is_one_line_before_analysing(trained, tmp_path, capsys, setting):
    from omegaconf import OmegaConf

    run = copy_of(trained, tmp_path)
    config = OmegaConf.load(run.config)
    key, value = setting.split("=", 1)
    OmegaConf.update(config, key, OmegaConf.create(f"v: {value}").v, force_add=True)
    run.config.write_text(OmegaConf.to_yaml(config))
    before = run.results.read_text()

    def analysed(*args):
        raise AssertionError("the analysis ran with a setting it cannot use")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(HeadAnalysis, "run", analysed)
        assert analyse.main([str(run.path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {run.config}: ") and BAD_SETTINGS[setting] in err, err
    assert run.results.read_text() == before


@pytest.mark.parametrize("device", ["xla", "meta", "nonsense"])
def test_verify_on_a_device_it_cannot_use_is_one_line_exit_2(trained, capsys, device):
    assert verify.main([str(trained), "--device", device]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: --device {device}: ")


# ---- class 7: a damaged section says "not recorded", the rest of the page draws --------------------------------
def test_a_section_drawn_from_a_damaged_file_says_not_recorded_and_the_rest_draw(trained, tmp_path, browser):
    from tests.test_html_report import Page

    run = copy_of(trained, tmp_path)
    table = run.table("ablation").read_text().splitlines()
    run.table("ablation").write_text("\n".join([table[0], *("x" + row[1:] for row in table[1:])]) + "\n")  # layer x
    maps = json.loads(run.attention_data("final").read_text())
    del maps["probes"]  # valid JSON, but not the maps the page draws
    run.attention_data("final").write_text(json.dumps(maps))
    assert html_report.main([str(run.path)]) == 0
    page = Page(browser, run.report)  # the module's Chromium (tests/conftest.py)
    drawn = page.page.eval_on_selector_all("section", "nodes => nodes.map(n => [n.id, n.innerText])")
    assert page.errors == []
    sections = dict(drawn)
    assert list(sections) == ["lab", "config", "curves", "attention", "roles", "ablation", "pruning", "dla",
                              "patching", "head_story", "mistakes"]  # fmt: skip
    for damaged in ("attention", "ablation"):
        assert "Not recorded: what the run directory holds for this section is damaged" in sections[damaged]
    for whole in ("lab", "config", "curves", "roles", "pruning", "dla", "patching", "head_story", "mistakes"):
        assert "Not recorded" not in sections[whole], whole


def test_analyse_writing_over_a_directory_is_one_line(trained, tmp_path, capsys):
    run = copy_of(trained, tmp_path)
    run.table("ablation").unlink()
    run.table("ablation").mkdir()
    assert analyse.main([str(run.path), "--problems", "20", "--no-circuits"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {run.table('ablation')}: a directory where a run writes a file; remove it and start again\n"


def test_a_config_larger_than_any_a_run_writes_is_refused_before_it_is_parsed(tmp_path):
    run = RunDir(tmp_path)
    run.config.write_text("seed: 1\n" * (rundir.MAX_YAML_BYTES // 8 + 1))  # valid YAML, slow to parse in Python
    with no_hang("reading config.yaml", seconds=5), pytest.raises(RunDirError, match="more than a config a run writes"):
        run.read_yaml(run.config)


@pytest.mark.parametrize(
    "how", ["truncated", "wrong type", "too deep", "too big", "a FIFO", "a link out", "a directory"]
)
def test_the_head_count_comparison_reads_the_final_maps_through_the_reader(tmp_path, how):
    """experiment=why_multi_head's comparison (analysis/compare.py) read attention/final.json with read_text(): a FIFO
    there hung it, a link out read another file, a damaged one was a traceback. Now one line names the file."""
    from analysis.compare import final_maps

    run = RunDir(tmp_path / "run")
    maps = {"probes": ["1+2"], "weights": [[[[[1.0]]]]]}  # (layers, probes, heads, T, T)
    run.write_json(run.attention_data("final"), maps)
    assert final_maps(run)["probe"] == "1+2"  # whole, it draws
    (tmp_path / "outside").mkdir()
    damage(run.attention_data("final"), "json", how, tmp_path / "outside")
    with no_hang("the comparison"):
        said = final_maps(run)
    assert isinstance(said, str) and "\n" not in said and str(run.attention_data("final")) in said, said


# the reads outside storage/ that are not of a run directory's files, and why
NOT_A_RUN_FILE = {
    "analysis/html_report.py": "the page's own template and script, files of the project",
    "analysis/lab.py": "the lab's script, a file of the project",
    "analysis/record.py": "report.html, the page this run has just written, handed to wandb",
    "model/export.py": "the tokenizer_config.json transformers has just written into the export directory",
    "training/limits.py": "/proc/meminfo and the project's own configs/",
    "model/own_block.py": "the learner's block, the file model.attention= names on the command line, hashed and run",
    "calc.py": "--eval FILE, the user's problems, read line by line within calc.py's limits",
}


def direct_reads(source: str) -> list[int]:
    """Lines that open a file by themselves: open(...), a pathlib read (``.read_text()``, ``.read_bytes()``, with no
    argument: the run directory's reader takes the file as one), json.load, OmegaConf.load, yaml's loaders."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            lines.append(node.lineno)
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            pathlib_read = func.attr in ("read_text", "read_bytes", "open") and not node.args
            loader = (owner, func.attr) in (("json", "load"), ("OmegaConf", "load")) or owner == "yaml"
            if (pathlib_read and owner != "os") or loader:
                lines.append(node.lineno)
    return lines


def test_every_file_of_a_run_directory_is_read_through_the_run_directory_s_reader():
    """Outside storage/ nothing opens a file by itself: a run directory's files are read by storage/rundir.py's
    bounded reader (RunDir.read_text, read_json, read_yaml, read_csv). A module that reads something else says what
    (NOT_A_RUN_FILE); analysis/compare.py read attention/final.json by itself."""
    files = [path for folder in ("analysis", "training", "model", "data") for path in (ROOT / folder).rglob("*.py")]
    files += [ROOT / name for name in ("train.py", "calc.py", "analyse.py", "verify.py", "bench.py")]
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in files
        if path.relative_to(ROOT).as_posix() not in NOT_A_RUN_FILE
        for line in direct_reads(path.read_text())
    ]
    assert found == [], found
    assert direct_reads("json.loads(job.attention_data('final').read_text())") == [1]  # what compare.py did
