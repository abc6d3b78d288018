"""The run directory: the one place that knows its layout, whose run it is, and whether that run finished.

    runs/<date>_<time>/
        results.json        {"status": "running" | "ok" | "failed" | "interrupted", ...}; "running" from the
                            first write, so a run killed with no chance to say so is seen as unfinished
        run.lock            the OS lock (filelock) of the process writing here, its pid inside (one run at a
                            time; the OS frees it when that process ends, however it ends)
        config.yaml  tokenizer.json  history.json  test_mistakes.json  error.log
        attention_block.py  a learner's own block (model.attention=), copied as text: data, never imported
        checkpoints/best.ckpt  interrupted.ckpt  last-good.ckpt
        attention/<tag>_layer<i>.png  attention/<tag>.json     (tag: step000300 during training, final at the end)
        <analysis>.csv  <analysis>.png     one pair per registered analysis (ablation, pruning, ...)
        analysis.json       what the page needs to render the analyses (their columns, labels, units, ...)
        report.html  wandb/  .hydra/

    multirun/<date>/<time>/        (a sweep: :class:`SweepDir`)
        <n>_<overrides>/  multirun.yaml  sweep_summary.csv/.md/.png  sweep_report.html  why_multi_head.png/.md

Every other file asks a :class:`RunDir` or :class:`SweepDir` for these paths.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import re
import shlex
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from storage.messages import one_line
from storage.results import SCHEMA, Results

if TYPE_CHECKING:
    from filelock import FileLock

HYDRA_FILES = (".hydra", ".hydra-resume")  # what Hydra writes before the run starts
RUN_PATTERNS = ("runs/*", "multirun/*/*")  # where runs are: single runs, and the jobs of sweeps
RUN_FOLDERS = ("runs", "multirun")  # the project's folders of runs: every search stays inside them

# What is read from a run directory is bounded: a run directory is data from anywhere (zipped, shared, damaged).
MAX_FILE_BYTES = 64 * 2**20  # a JSON, CSV or text file of a run (its largest, attention maps, is ~1 MB)
# a checkpoint, loaded whole into memory by torch.load: the default run's is under 1 MB, and a model of 200M parameters
# with AdamW's two moments is about 2.4 GB; larger is refused before torch.load reads it (one line)
MAX_CHECKPOINT_BYTES = 4 * 2**30
MAX_YAML_BYTES = 2**20  # a config (config.yaml, .hydra/*.yaml: a few KB); YAML is parsed in Python, slowly
MAX_DEPTH = 32  # nesting of JSON and YAML (a run writes 7 at most); deeper is refused, never recursed into
MAX_SEARCH_DEPTH = 6  # folders below runs/ or multirun/ searched for runs (multirun/<date>/<time>/<job>/<a=b/c>)


def write_atomically(path: Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` beside ``path``, flushed to the disk, then renamed over it: a kill, a power cut or a full
    disk leaves the old file, never half a new one, and a link at ``path`` is replaced, never written through
    (into a file outside the run). The temporary file is in the same directory (so the rename
    never becomes a copy across filesystems), and a full disk is an OSError naming ``path``, not the
    temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():  # os.replace would fail with a bare EISDIR
        raise RunFileError(f"{path}: a directory where a run writes a file; remove it and start again")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink(missing_ok=True)  # never written through: a link left there would send the bytes elsewhere
        write(tmp)
        with open(tmp, "rb+") as f:  # what write() left in the page cache reaches the disk before the rename
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_directory(path.parent)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise OSError(e.errno, os.strerror(e.errno), str(path)) from None
        raise
    finally:
        tmp.unlink(missing_ok=True)
    return path


def hydra_override(key: str, value: str | Path) -> str:
    """``key=value`` as one argument (an item of ``sys.argv``, no shell between) that Hydra's override parser
    reads back as exactly ``value``: quoted for Hydra (``"..."``, a quote or the backslashes before one escaped)
    when it holds characters Hydra reads as syntax (a sweep job's directory, ``0_a=b,c=d``)."""
    value = str(value)
    if re.fullmatch(r"[\w./:+~-]+", value):
        return f"{key}={value}"
    escaped = re.sub(r'(\\*)("|$)', lambda m: m.group(1) * 2 + ('\\"' if m.group(2) else ""), value)
    return f'{key}="{escaped}"'


def override(key: str, value: str | Path) -> str:
    """:func:`hydra_override` as one shell word, for a command to paste into a shell: quoted for the shell too,
    when needed (the shell takes those quotes off; Hydra must never see them)."""
    return shlex.quote(hydra_override(key, value))


# The locks this process holds, by the lock file's real path. A lock is the OS's (filelock: flock), held while its
# file is open: kept here from the claim before Hydra starts through every job of a sweep, and freed by the OS when
# the process ends however it ends (kill -9, a power cut): no lock is ever stale. A lock held elsewhere on the same
# host names its process (the pid, written into the file once it is held), so a refusal says who holds the run.
_HELD: dict[str, FileLock] = {}
CLAIM_WAIT = 0.5  # seconds a claim waits out another command that only looks (owner(): a lock held for a moment)


def _take_lock(lock: Path) -> bool:
    """Hold ``lock`` for this process (True), or False when another process holds it."""
    from filelock import FileLock, Timeout  # here: its import (asyncio's) is 0.1 s that calc.py need not pay

    key = os.path.realpath(lock)
    if key in _HELD:
        return True
    held = FileLock(lock, timeout=CLAIM_WAIT, on_acquired=lambda fd: os.write(fd, str(os.getpid()).encode()))
    try:
        held.acquire()
    except Timeout:
        return False
    _HELD[key] = held
    return True


def _release_lock(lock: Path) -> None:
    """Let go of ``lock`` if this process holds it; the file goes first, while still held (a process that opened it
    meanwhile finds it unlinked once it gets the lock, and tries again on a new one: filelock)."""
    held = _HELD.pop(os.path.realpath(lock), None)
    if held is not None:
        lock.unlink(missing_ok=True)
        held.release()


def _holder(lock: Path) -> int | None:
    """The pid of the other process holding ``lock`` (-1 where it never wrote it), or None: no lock file, one no
    process holds (left by a killed run), one that is no regular file, or this process's own."""
    try:
        if os.path.realpath(lock) in _HELD or not stat.S_ISREG(os.lstat(lock).st_mode):
            return None
    except OSError:
        return None
    from filelock import FileLock, Timeout

    probe = FileLock(lock, timeout=0, fallback_to_soft=False)
    try:
        probe.acquire()
    except Timeout:  # held: the pid is in the file a moment after the lock is taken
        deadline = time.monotonic() + CLAIM_WAIT
        while not (pid := _read_pid(lock)) and time.monotonic() < deadline:
            time.sleep(0.01)
        return pid or -1
    except OSError:  # cannot be opened for writing (a read-only directory), or no flock: no run holds it
        return None
    probe.release()
    return None


def _read_pid(lock: Path) -> int | None:
    try:
        text = (read_text(lock, lock.parent) or "").strip()
    except RunFileError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def readable_checkpoint(path: Path) -> str | None:
    """None when ``path`` is a checkpoint that loads (tensors and plain values only), else what is wrong."""
    run = RunDir.of_checkpoint(path)
    try:  # torch.load would wait on a FIFO for ever, or load another run's weights through a link
        check_file(path, run.path if run is not None else None)
    except RunFileError as e:
        return str(e).split(": ", 1)[1]
    try:
        if path.stat().st_size == 0:
            return "empty (0 bytes)"
        import torch  # storage/ is the lowest layer; torch only when a checkpoint is really checked

        data = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as e:
        return f"unreadable ({e.strerror or e})"
    except Exception:  # truncated, random bytes or a foreign pickle: torch raises many kinds
        return "truncated or corrupt (it does not load)"
    if not isinstance(data, dict) or "state_dict" not in data:
        return "not a checkpoint (no state_dict)"
    return None


class RunDirError(ValueError):
    """A run directory that cannot be used as asked; the message is one line saying what works instead."""


class RunFileError(RunDirError):
    """A file of a run directory that cannot be read as what it should be; the message is one line
    ``<file>: <what is wrong>``."""


# ---- reading a run directory: the one place that bounds what is read from it ----------------------------------
def read_bytes(path: Path, inside: Path) -> bytes | None:
    """The bytes of ``path``, a file of the directory ``inside``; None when there is no such file. Only a regular
    file inside that directory (a link to another of its files is fine), of at most MAX_FILE_BYTES, is read:
    anything else -- a FIFO, a device, a directory, a link out of the directory -- is a :class:`RunFileError`,
    found without waiting (a FIFO is opened non-blocking, so no writer is waited for)."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    _refuse_outside(path, inside)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise RunFileError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunFileError(f"{path}: {_kind(info.st_mode)}, not a file; a run writes a file there (remove it)")
        if info.st_size > MAX_FILE_BYTES:
            raise RunFileError(f"{path}: {info.st_size:,} bytes, more than a run writes ({MAX_FILE_BYTES:,} at most)")
        chunks, left = [], MAX_FILE_BYTES + 1
        while left and (chunk := os.read(fd, min(left, 2**20))):  # a file still growing is read within the bound
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as e:
        raise RunFileError(f"{path}: cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_FILE_BYTES:
        raise RunFileError(f"{path}: more than a run writes ({MAX_FILE_BYTES:,} bytes at most)")
    return data


def check_file(path: Path, inside: Path | None = None, max_bytes: int = MAX_CHECKPOINT_BYTES) -> None:
    """:class:`RunFileError` unless ``path`` is a regular file (inside the directory ``inside``, when given) of at most
    ``max_bytes``, for a file read whole by another library (a checkpoint: torch.load), which would wait on a FIFO,
    read a link's target, or fill the memory."""
    path = Path(path)
    if inside is not None:
        _refuse_outside(path, inside)
    try:
        info = os.stat(path)
    except OSError as e:
        raise RunFileError(f"{path}: cannot be read ({e.strerror or e})") from None
    if not stat.S_ISREG(info.st_mode):
        raise RunFileError(f"{path}: {_kind(info.st_mode)}, not a file")
    if info.st_size > max_bytes:
        raise RunFileError(
            f"{path}: {info.st_size:,} bytes, larger than a tinycalc checkpoint may be ({max_bytes:,} at most)"
        )


def _refuse_outside(path: Path, inside: Path) -> None:
    """RunFileError when ``path`` is, or goes through, a link to somewhere outside the directory ``inside``."""
    real, root = os.path.realpath(path), os.path.realpath(inside)
    if os.path.commonpath([real, root]) != root:
        raise RunFileError(f"{path}: a link to {real}, outside {inside}; a run's files are its own (replace the link)")


def _kind(mode: int) -> str:
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket"}
    return next((name for test, name in kinds.items() if test(mode)), "a device")


def read_text(path: Path, inside: Path) -> str | None:
    """:func:`read_bytes` as UTF-8 text."""
    data = read_bytes(path, inside)
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        raise RunFileError(f"{path}: not UTF-8 text (damaged?)") from None


def parse_json(text: str, path: Path):
    """JSON text -> plain values, nested at most MAX_DEPTH deep, or :class:`RunFileError`."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
        deep = True
    except ValueError as e:
        raise RunFileError(f"{path}: unreadable (not valid JSON: {one_line(e)})") from None
    else:
        deep = _depth(value) > MAX_DEPTH
    if deep:
        raise RunFileError(f"{path}: nested more than {MAX_DEPTH} deep, deeper than a run writes (damaged?)")
    return value


def _depth(value) -> int:
    """How deeply lists and dicts nest in ``value`` (0 for a scalar), counted without recursion and no further
    than one past MAX_DEPTH."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                break
            stack.extend((x, depth + 1) for x in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_yaml(text: str, path: Path):
    """YAML text -> an OmegaConf config (as ``OmegaConf.load`` reads it), or :class:`RunFileError`. Checked first,
    event by event, in time linear in the text: no anchors or aliases (what a run writes has none, and a few
    aliases of aliases expand to billions of values: an "alias bomb"), nesting at most MAX_DEPTH deep."""
    import io

    import yaml
    from omegaconf import OmegaConf

    if len(text) > MAX_YAML_BYTES:
        raise RunFileError(f"{path}: {len(text):,} characters, more than a config a run writes ({MAX_YAML_BYTES:,})")
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise RunFileError(f"{path}: holds YAML anchors or aliases (&, *), which a run never writes (damaged?)")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise RunFileError(f"{path}: nested more than {MAX_DEPTH} deep, deeper than a run writes")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        return OmegaConf.load(io.StringIO(text))
    except RunFileError:
        raise
    except Exception as e:  # noqa: BLE001 -- yaml and omegaconf raise several kinds
        raise RunFileError(f"{path}: not valid YAML ({one_line(e)})") from None


def _real_dirs(folder: Path, depth: int) -> Iterator[Path]:
    """``folder``'s sub-directories, ``depth`` levels down at most, never through a link (a link to / is not
    crawled) -- each level sorted."""
    if depth <= 0:
        return
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        yield Path(entry.path)
        yield from _real_dirs(Path(entry.path), depth - 1)


def _refuse_if_no_lock_file(lock: Path) -> None:
    """RunDirError when ``lock`` is there but is no file a run writes (a directory, a FIFO, a link): it cannot be
    taken, and it is not ours to remove."""
    try:
        mode = os.lstat(lock).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        what = "a link" if stat.S_ISLNK(mode) else _kind(mode)
        raise RunDirError(f"{lock} is {what}, not the lock file a run writes; remove it and start again")


# What this process found where it claimed a run directory (its real path -> the names the folder held, or None
# where the claim made the folder; and the folders the claim made, innermost first): a refused run undoes only that.
_FOUND: dict[str, tuple[frozenset[str] | None, tuple[Path, ...]]] = {}


def _note_found(path: Path) -> None:
    """Before the first claim of ``path`` in this process: what is there, and which folders a mkdir would make."""
    key = os.path.realpath(path)
    if key in _FOUND:
        return
    made = tuple(itertools.takewhile(lambda folder: not os.path.lexists(folder), (path, *path.parents)))
    _FOUND[key] = (None if made or not path.is_dir() else frozenset(os.listdir(path)), made)


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._locked = False
        self._continued: tuple[Path, bytes | None] | None = None  # resumed: its checkpoint, the record it replaced

    def __str__(self) -> str:
        return str(self.path)

    # ---- the layout ---------------------------------------------------------------------------------------
    results = property(lambda self: self.path / "results.json")
    history = property(lambda self: self.path / "history.json")
    config = property(lambda self: self.path / "config.yaml")
    tokenizer = property(lambda self: self.path / "tokenizer.json")
    mistakes = property(lambda self: self.path / "test_mistakes.json")
    attention_block = property(lambda self: self.path / "attention_block.py")
    error_log = property(lambda self: self.path / "error.log")
    lock = property(lambda self: self.path / "run.lock")
    checkpoints = property(lambda self: self.path / "checkpoints")
    best_checkpoint = property(lambda self: self.checkpoints / "best.ckpt")
    interrupted_checkpoint = property(lambda self: self.checkpoints / "interrupted.ckpt")
    last_good_checkpoint = property(lambda self: self.checkpoints / "last-good.ckpt")
    attention = property(lambda self: self.path / "attention")
    analysis = property(lambda self: self.path / "analysis.json")
    report = property(lambda self: self.path / "report.html")
    hydra_config = property(lambda self: self.path / ".hydra" / "config.yaml")
    hydra_overrides = property(lambda self: self.path / ".hydra" / "overrides.yaml")
    hydra_choices = property(lambda self: self.path / ".hydra" / "hydra.yaml")  # runtime.choices: groups chosen

    def table(self, analysis: str) -> Path:
        """An analysis's rows: ablation.csv, pruning.csv, ..."""
        return self.path / f"{analysis}.csv"

    def figure(self, analysis: str) -> Path:
        return self.path / f"{analysis}.png"

    def attention_image(self, tag: str, layer: int) -> Path:
        return self.attention / f"{tag}_layer{layer}.png"

    def attention_data(self, tag: str) -> Path:
        return self.attention / f"{tag}.json"

    def attention_snapshots(self) -> list[Path]:
        """The maps drawn during training, oldest first (final.json is the end-of-run one)."""
        if self.attention.is_symlink() or not self.attention.is_dir():
            return []
        return sorted(self.attention.glob("step*.json"))

    # ---- reading its files: bounded in size, depth and kind (regular files inside the directory) -------------
    def own_files(self) -> list[Path]:
        """The run's files, its checkpoints and Hydra's among them; not its lock, nor wandb's folder (which holds the
        wandb run they are kept in: analysis/record.py)."""
        return [
            path
            for path in sorted(self.path.rglob("*"))
            if path.is_file()
            and path.relative_to(self.path).parts[0] != "wandb"
            and not path.name.startswith(self.lock.name)
        ]

    def read_bytes(self, path: Path) -> bytes | None:
        """A file of this run (None: there is none), or :class:`RunFileError`: see :func:`read_bytes`."""
        return read_bytes(path, self.path)

    def read_text(self, path: Path) -> str | None:
        return read_text(path, self.path)

    def read_json(self, path: Path, kind: type = dict):
        """A JSON file of this run as a ``kind`` (None: there is none), or :class:`RunFileError`."""
        text = self.read_text(path)
        if text is None:
            return None
        value = parse_json(text, path)
        if not isinstance(value, kind):
            raise RunFileError(
                f"{path}: not a JSON {'object' if kind is dict else kind.__name__} ({type(value).__name__})"
            )
        return value

    def read_yaml(self, path: Path):
        """A YAML file of this run (config.yaml, .hydra/*.yaml) as an OmegaConf mapping (None: there is none), or
        :class:`RunFileError`."""
        text = self.read_text(path)
        if text is None:
            return None
        from omegaconf import OmegaConf

        config = parse_yaml(text, path)
        if not OmegaConf.is_dict(config):
            raise RunFileError(f"{path}: not a mapping of settings ({type(config).__name__})")
        return config

    def read_csv(self, path: Path) -> list[dict] | None:
        """An analysis table of this run: one dict per row (None: there is none), or :class:`RunFileError`."""
        import csv
        import io

        text = self.read_text(path)
        if text is None:
            return None
        try:
            return list(csv.DictReader(io.StringIO(text, newline="")))
        except csv.Error as e:
            raise RunFileError(f"{path}: not a CSV table ({one_line(e)})") from None

    @classmethod
    def of_checkpoint(cls, ckpt: str | Path) -> RunDir | None:
        """runs/<stamp>/checkpoints/x.ckpt -> RunDir(runs/<stamp>); None for a checkpoint outside a run."""
        ckpt = Path(ckpt)
        return cls(ckpt.parent.parent) if ckpt.parent.name == "checkpoints" else None

    @classmethod
    def under(cls, root: str | Path = ".") -> list[RunDir]:
        """Every run directory under ``root``: runs/<stamp>, multirun/<date>/<job>, and a sweep's nested jobs
        (multirun/<date>/<time>/<n>_a=b/c): only inside runs/ and multirun/, MAX_SEARCH_DEPTH folders deep at most,
        never through a link (a link in multirun/ to / is not crawled)."""
        found = []
        for folder in RUN_FOLDERS:
            top = Path(root) / folder
            if not top.is_dir():
                continue
            for path in _real_dirs(top, 1 if folder == "runs" else MAX_SEARCH_DEPTH):
                depth = len(path.relative_to(top).parts)
                if folder == "runs" or depth == 2 or (depth > 2 and (path / ".hydra" / "overrides.yaml").is_file()):
                    found.append(cls(path))
        return found

    @staticmethod
    def new_path(root: str = "runs") -> str:
        """Where a new run goes: runs/<date>_<time>, with a suffix when that second is taken already."""
        base = f"{root}/{datetime.now():%Y-%m-%d_%H-%M-%S}"
        path, n = base, 1
        while Path(path).exists():
            n += 1
            path = f"{base}_{n}"
        return path

    # ---- what state the run is in ---------------------------------------------------------------------------
    def read_results(self) -> Results:
        """results.json as written (storage/results.py: the schema), or {} when it is missing or unreadable."""
        try:
            return self.read_json(self.results) or {}
        except RunFileError:
            return {}

    @property
    def status(self) -> str | None:
        """ok, failed, interrupted, running (a run in progress, or one killed before it could say so), or None."""
        return self.read_results().get("status")

    def owner(self) -> int | None:
        """The pid of another process holding this directory's lock (an OS lock: held exactly while that process
        lives), else None."""
        return _holder(self.lock)

    @property
    def unfinished(self) -> bool:
        """A run that started training here and never finished (killed, or running now)."""
        return self.status == "running"

    def used(self) -> bool:
        """Has a run written anything of its own here (more than Hydra's files and a lock)?"""
        return self.path.is_dir() and any(
            p.name not in HYDRA_FILES and not p.name.startswith(self.lock.name) for p in self.path.iterdir()
        )

    def describe_unfinished(self) -> str:
        """One sentence for a run that did not finish, with what to do (for calc.py and resume=)."""
        owner = self.owner()
        if owner:
            return f"the run in {self.path} is still training (pid {owner})"
        hint = (
            f"; continue it with  python train.py {override('resume', self.best_checkpoint)}"
            if self.best_checkpoint.is_file()
            else ""
        )
        return f"the run in {self.path} did not finish (killed?){hint}"

    # ---- claiming the directory for this process -------------------------------------------------------------
    def claim(self, resuming: bool) -> None:
        """Make this process the directory's only writer, or RunDirError.

        A new run needs a directory no run has used; a resumed one needs the run it continues to be
        stopped (not finished, not running in another process).
        """
        try:
            self._claim(resuming)
        except OSError as e:  # /proc/..., a path under a file, a read-only filesystem, no permission
            raise RunDirError(
                f"cannot write the run in {self.path} ({e.strerror or e}); give hydra.run.dir a directory you can "
                "write (leave it unset for a fresh one under runs/)"
            ) from None

    def _claim(self, resuming: bool) -> None:
        _note_found(self.path)  # what a refused run then leaves as it was (discard_if_unused)
        self.path.mkdir(parents=True, exist_ok=True)
        self._refuse_if_owned()
        if not resuming:
            self.refuse_if_used()
        _refuse_if_no_lock_file(self.lock)
        if not _take_lock(self.lock):  # held already by this process (claimed before Hydra started) is taken
            self._refuse_if_owned()
            raise RunDirError(f"{self.path} is in use by another run; give this run its own directory")
        self._locked = True

    def refuse_if_used(self) -> None:
        """RunDirError when a run has written here already: a new run needs a directory of its own."""
        if self.used():
            raise RunDirError(
                f"{self.path} holds a run already (status {self.status or 'unknown'}); give this run "
                "its own directory (leave hydra.run.dir unset for a fresh one), or resume= that run"
            )

    def _refuse_if_owned(self) -> None:
        owner = self.owner()
        if owner:
            raise RunDirError(
                f"{self.path} is in use by another run (pid {owner}); give this run its own "
                "directory (leave hydra.run.dir unset for a fresh one)"
            )

    @property
    def owns_lock(self) -> bool:
        return self._locked

    def release(self) -> None:
        """Let go of run.lock if this process holds it (never another's)."""
        _release_lock(self.lock)
        self._locked = False

    def discard_if_unused(self) -> None:
        """A run that never began (nothing written but Hydra's files and the lock): undo what this process did to the
        directory. The folders its claim made go; in a folder that was there already, only the Hydra files that were
        not. A directory this process did not claim is never touched, nor is one found holding a run's files; what
        the claim found is forgotten (a folder made again later is someone else's)."""
        found = _FOUND.pop(os.path.realpath(self.path), None)
        if found is None or not self.path.is_dir() or self.used() or self.owner():
            return
        names, made = found
        if names is None:
            shutil.rmtree(self.path, ignore_errors=True)
            for folder in made[1:]:  # the parents the claim made, while nothing else has been put there
                try:
                    folder.rmdir()
                except OSError:
                    break
        else:
            for name in {*HYDRA_FILES, self.lock.name} - names:
                written = self.path / name
                if written.is_symlink() or written.is_file():
                    written.unlink(missing_ok=True)
                elif written.is_dir():
                    shutil.rmtree(written, ignore_errors=True)

    # ---- writing -------------------------------------------------------------------------------------------
    def check_writable(self) -> None:
        """RunDirError unless a file can be written here (a read-only directory or filesystem, no space): asked
        before a long job whose results would otherwise be lost at its end. Tried, not asked of os.access, which
        says yes to root on a read-only directory and knows nothing of a full disk."""
        probe = self.path / f".write-check.{os.getpid()}"
        try:
            write_atomically(probe, lambda tmp: tmp.write_text("ok"))
            probe.unlink()
        except OSError as e:
            raise RunDirError(
                f"cannot write in {self.path} ({e.strerror or e}); make it writable, or copy the run somewhere "
                "writable and use the copy"
            ) from None

    @staticmethod
    def write_json(path: Path, data, indent: int | None = 2) -> Path:
        """Write atomically (a full disk or a kill leaves the old file, never half a new one)."""
        return RunDir.write_text(path, json.dumps(data, indent=indent) + "\n")

    @staticmethod
    def write_text(path: Path, text: str) -> Path:
        return write_atomically(path, lambda tmp: tmp.write_text(text))

    def write_results(self, data: Results) -> None:
        self.write_json(self.results, {"schema": SCHEMA} | data)

    def mark_running(self, resumed_from: str | None, previous: dict) -> None:
        """From the first write on, a run that stops without saying so is seen as unfinished. A resumed run keeps
        the record it replaces, to put back if it fails or stops before it trained (:meth:`put_back`)."""
        if resumed_from is not None:
            self._continued = Path(resumed_from), self.results.read_bytes() if self.results.is_file() else None
        self.write_results(
            {
                "status": "running",
                "resumed_from": resumed_from,
                "train_seconds": previous.get("train_seconds", 0.0),
                "wandb_run_id": previous.get("wandb_run_id"),
            }
        )

    @property
    def resume_command(self) -> str:
        """The command that continues this run, quoted for the shell and for Hydra (a sweep job's directory,
        ``0_a=b,c=d``, holds characters Hydra reads as syntax). A run trained with a learner's block names it again:
        resume takes code from the command line only (training/resume.py)."""
        command = f"python train.py {override('resume', self.path)}"
        if self.attention_block.is_file():
            try:
                spec = parse_yaml(self.read_text(self.config) or "", self.config).model.attention
            except Exception:  # noqa: BLE001 -- a damaged config.yaml: resume itself says what is wrong
                spec = None
            command += f" {override('model.attention', spec)}" if isinstance(spec, str) else ""
        return command

    def mark_interrupted(
        self,
        step: int,
        checkpoint: Path | None,
        train_seconds: float,
        wandb_run_id: str | None,
        resume: str | None = None,
        phase: str = "training",
    ) -> None:
        """A signal stopped the run in ``phase``; ``checkpoint`` continues it (None: nothing saved to continue
        from), with ``resume`` (default: this directory's resume command; none without a checkpoint)."""
        record: Results = {
            "status": "interrupted",
            "interrupted_phase": phase,
            "step": step,
            "checkpoint": None if checkpoint is None else str(checkpoint),
            "train_seconds": round(train_seconds, 2),
            "wandb_run_id": wandb_run_id,
        }
        if checkpoint is not None:
            record["resume"] = resume or self.resume_command
        self.write_results(record)

    def put_back(self) -> bool:
        """A resumed run that failed, or stopped before it trained a step: the record of the run it continued goes
        back, as it was -- while the checkpoint it continued from is there, that run can still be continued (a
        wandb id rejected, a Ctrl-C while it starts, take nothing from it). True when put back."""
        continued = self._continued
        if continued is None or self.status != "running" or not continued[0].is_file():
            return False
        record = continued[1]
        if record is None:
            self.results.unlink(missing_ok=True)
        else:
            write_atomically(self.results, lambda tmp: tmp.write_bytes(record))
        self._continued = None
        return True

    def mark_failed(self, message: str) -> None:
        """Record a failure -- unless the directory holds results of its own that must not be lost
        (a finished run, or an interrupted one that can still be resumed: :meth:`put_back`)."""
        if self.put_back():
            return
        if self.status in (None, "running", "failed"):
            self.write_results({"status": "failed", "error": message})

    # ---- resuming ------------------------------------------------------------------------------------------
    def resume_checkpoint(self) -> Path:
        """The checkpoint that continues this run, or RunDirError saying what would work. A damaged
        interrupted.ckpt (a kill or a full disk mid-write) is never chosen: the message offers best.ckpt."""
        damage = None
        if self.interrupted_checkpoint.is_file():
            damage = readable_checkpoint(self.interrupted_checkpoint)
            if damage is None:
                return self.interrupted_checkpoint
        owner = self.owner()
        if owner:
            raise RunDirError(f"resume={self.path}: that run is still training (pid {owner})")
        status = self.status
        best_ok = self.best_checkpoint.is_file() and readable_checkpoint(self.best_checkpoint) is None
        if damage is not None:
            why = f"its checkpoint {self.interrupted_checkpoint.name} is {damage}" + (
                f"; continue from its best weights with  resume={self.best_checkpoint}"
                if best_ok
                else f", and it has no readable {self.best_checkpoint.name}; start a new run"
            )
        elif status == "ok":
            why = "that run finished (its results are in results.json); nothing to resume"
        elif status in ("running", "interrupted") and best_ok:
            how = "was stopped at once" if status == "interrupted" else "did not finish"
            why = (
                f"that run {how} and saved no interrupted.ckpt{' (killed?)' if status == 'running' else ''}; "
                f"continue from its best weights with  {override('resume', self.best_checkpoint)}"
            )
        elif self.path.is_dir():
            why = "no checkpoints/interrupted.ckpt there; give a run directory that was interrupted, or a .ckpt file"
        else:
            why = "no such run directory or .ckpt file"
        raise RunDirError(f"resume={self.path}: {why}")


def resume_target(resume: str | Path) -> Path:
    """resume= (a run directory or a .ckpt file) -> the checkpoint to continue from, or RunDirError."""
    path = Path(str(resume)).expanduser()
    if path.is_file() and path.suffix == ".ckpt":
        damage = readable_checkpoint(path)
        if damage is None:
            return path
        run = RunDir.of_checkpoint(path)
        offer = run.best_checkpoint if run is not None and run.best_checkpoint != path else None
        if offer is not None and offer.is_file() and readable_checkpoint(offer) is None:
            raise RunDirError(f"resume={resume}: that checkpoint is {damage}; continue with  resume={offer}")
        raise RunDirError(f"resume={resume}: that checkpoint is {damage}")
    if path.is_file():
        raise RunDirError(f"resume={resume}: not a .ckpt file or run directory")
    return RunDir(path).resume_checkpoint()


def run_dir_for(resume: str | None) -> str:
    """Hydra's run directory for this invocation: a new one, or the directory of the run being resumed."""
    if resume is not None:
        path = Path(str(resume)).expanduser()
        if path.is_dir():
            return str(path)
        owner = RunDir.of_checkpoint(path)
        if path.is_file() and owner is not None:
            return str(owner.path)
    return RunDir.new_path()


class SweepDir:
    """A Hydra multirun's directory: one job directory (a :class:`RunDir`) per run, and the sweep's own files."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    multirun = property(lambda self: self.path / "multirun.yaml")
    summary_csv = property(lambda self: self.path / "sweep_summary.csv")
    summary_md = property(lambda self: self.path / "sweep_summary.md")
    summary_figure = property(lambda self: self.path / "sweep_summary.png")
    report = property(lambda self: self.path / "sweep_report.html")
    comparison_figure = property(lambda self: self.path / "why_multi_head.png")
    comparison_md = property(lambda self: self.path / "why_multi_head.md")

    lock = property(lambda self: self.path / "sweep.lock")

    def claim(self) -> None:
        """Make this process the sweep directory's only sweep, before Hydra writes multirun.yaml or any job's
        .hydra/ there; RunDirError when another sweep is running there or has run there."""
        holder = _holder(self.lock)
        if holder:
            raise RunDirError(
                f"{self.path} is in use by another sweep (pid {holder}); give this sweep its own hydra.sweep.dir"
            )
        used = [job.path.name for job in self.jobs() if job.used() or job.owner()]
        if used:
            raise RunDirError(
                f"{self.path} holds a sweep already (job {used[0]}); give this sweep its own hydra.sweep.dir "
                "(leave it unset for a fresh one)"
            )
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            _refuse_if_no_lock_file(self.lock)
            if not _take_lock(self.lock):  # another sweep won the race
                raise RunDirError(f"{self.path} is in use by another sweep; give this sweep its own hydra.sweep.dir")
        except OSError as e:  # /proc/..., a path under a file, a read-only filesystem, no permission
            raise RunDirError(
                f"cannot write the sweep in {self.path} ({e.strerror or e}); give hydra.sweep.dir a directory you "
                "can write (leave it unset for a fresh one under multirun/)"
            ) from None

    def release(self) -> None:
        _release_lock(self.lock)

    def jobs(self) -> list[RunDir]:
        """Job directories, in job order -- nested ones too (a swept value with '/' in it makes
        <n>_a=b/c/.hydra/): each counts as the job it is."""
        paths = {p for p in _real_dirs(self.path, MAX_SEARCH_DEPTH) if (p / ".hydra" / "overrides.yaml").is_file()}
        first = lambda p: p.relative_to(self.path).parts[0]  # noqa: E731
        order = lambda p: (int(first(p).split("_")[0]) if first(p).split("_")[0].isdigit() else 0, str(p))  # noqa: E731
        return [RunDir(p) for p in sorted(paths, key=order)]
