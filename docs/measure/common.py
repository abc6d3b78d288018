"""What every section shares: running a project command (timed, with its peak memory), copying a figure it drew,
where and when a section was measured, and writing a rendered block between its markers.

A section module (docs/measure/<section>.py) holds three names: ``COMMAND`` (what it runs, as machine.json and the
docs say it), ``measure(scratch) -> dict`` (runs it; the dict becomes docs/measured/<section>.json) and ``BLOCKS``
(block name -> function of every section's JSON that renders ``<!-- measured:NAME -->`` ... ``<!-- /measured -->``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "docs" / "measured"
IMAGES = ROOT / "docs" / "images"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = "runs/<run>"  # how a run directory is written in the docs


# ---- running the project's commands ---------------------------------------------------------------------
@dataclass
class Ran:
    stdout: str
    seconds: float
    peak_gb: float


def run(
    args: list[str], cwd: Path, ok: tuple[int, ...] = (0,), merged: bool = True, timeout: float | None = None
) -> Ran:
    """``python <args>`` from ``cwd`` (wandb offline), timed as a whole command; stops with its output on failure.
    ``merged``: stderr is part of ``Ran.stdout`` (else it is shown only on failure). ``timeout``: seconds after
    which the command is killed, a failure too."""
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]  # the project first, then what was set
    env = os.environ | {"WANDB_MODE": "offline", "PYTHONPATH": os.pathsep.join(paths)}
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(
            [sys.executable, *args], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT if merged else err
        )
        timer = threading.Timer(timeout or 0, child.kill)
        if timeout:
            timer.start()
        _, status, usage = os.wait4(child.pid, 0)  # the child's own peak memory, which Popen.wait does not give
        timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    if child.returncode not in ok:
        how = f"was stopped after {timeout:.0f} s" if timeout and seconds >= timeout else f"exited {child.returncode}"
        sys.exit(f"error: python {' '.join(args)} {how}:\n{(errors + text)[-3000:]}")
    return Ran(text, round(seconds, 1), round(usage.ru_maxrss / 2**20, 2))


def train(scratch: Path, *overrides: str, timeout: float | None = None) -> Ran:
    return run([str(ROOT / "train.py"), *overrides], scratch, timeout=timeout)


def results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def finished_jobs(sweep: Path) -> list[Path]:
    """The job directories of the multirun at ``sweep`` that wrote results.json, in job order."""
    from storage.rundir import SweepDir

    return [job.path for job in SweepDir(sweep).jobs() if job.results.is_file()]


def bench(scratch: Path, *args: str, ok: tuple[int, ...] = (0,), timeout: float | None = None) -> dict:
    """``python bench.py ARGS --json``: its one JSON object (``ok=(0, 1)``: also when a variant failed, reported)."""
    ran = run([str(ROOT / "bench.py"), *args, "--json"], scratch, ok=ok, merged=False, timeout=timeout)
    return json.loads(ran.stdout)


def verify(run_dir: Path, scratch: Path, *options: str) -> dict:
    """``python verify.py RUN --json [options]`` (exit 1, a failed verification, is a result too): its verdict and
    suites."""
    verified = run([str(ROOT / "verify.py"), str(run_dir), "--json", *options], scratch, ok=(0, 1), merged=False)
    return next(iter(json.loads(verified.stdout).values()))


@dataclass
class Variant:
    """One line of a side-by-side study: ``python train.py experiment=<experiment> <overrides> seed=S`` on each seed
    (``experiment`` is a configs/experiment/ name, or None for the default config)."""

    label: str
    experiment: str | None
    overrides: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0,)

    @property
    def args(self) -> tuple[str, ...]:
        return (*([f"experiment={self.experiment}"] if self.experiment else []), *self.overrides)


def run_variants(scratch: Path, name: str, variants: list[Variant], extra=None) -> list[dict]:
    """Each variant on each of its seeds: ``python train.py <args> seed=S threads=1``, two whole commands at a time,
    in the order listed. Per run: steps, training seconds, test exact-match, the validation history (steps to
    mastery and to 100%, the best), where the run measured it exact-match by length, and what
    ``extra(run_dir, results)`` adds."""
    from concurrent.futures import ThreadPoolExecutor

    from analysis.sweep import steps_to
    from data.problems import MASTERED

    jobs = [(v, seed) for v in variants for seed in v.seeds]

    def one(n: int) -> dict:
        variant, seed = jobs[n]
        out = scratch / name / f"{n}_seed{seed}"
        ran = train(scratch, *variant.args, f"seed={seed}", "threads=1", f"hydra.run.dir={out}")
        r, val = results(out), json.loads((out / "history.json").read_text())["val"]
        best = max(val, key=lambda h: h["exact_match"])
        return {
            "variant": variant.label, "command": " ".join(["python train.py", *variant.args]), "seed": seed,
            "steps": r["steps"], "train_seconds": r["train_seconds"], "whole_seconds": ran.seconds,
            "test_exact_match": r["test_exact_match"], "steps_to_99": steps_to(val, MASTERED),
            "steps_to_100": steps_to(val, 1.0),
            "best_val": best["exact_match"], "best_val_step": best["step"], "length": r.get("length_exact_match") or {},
        } | (extra(out, r) if extra else {})  # fmt: skip

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(len(jobs))))


def hide_scratch(text: str, scratch: Path) -> str:
    """``text`` with the scratch directory's path left out (runs/<run>); a line of a rich table keeps its width."""
    out = []
    for line in text.splitlines():
        for prefix in {f"{scratch.resolve()}/", f"{scratch}/"}:
            n = line.count(prefix)
            if n:
                line = line.replace(prefix, "")
                if line.rstrip().endswith("│"):
                    end = line.rstrip()
                    line = end[:-1] + " " * (n * len(prefix)) + "│"
        out.append(line)
    return "\n".join(out)


# ---- figures: copied into docs/images with a hash of the code that drew them ----------------------------
def code_hash(files: list[str]) -> str:
    digest = hashlib.sha256()
    for name in files:
        digest.update(name.encode() + b"\0" + (ROOT / name).read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return digest.hexdigest()[:16]


def image(section_images: dict, source: Path, name: str, drawn_by: list[str]) -> None:
    """Copy a drawn figure into docs/images and note the hash of the code that drew it (``drawn_by``)."""
    shutil.copyfile(source, IMAGES / name)
    section_images[name] = code_hash(drawn_by)


def screenshot(page: Path, out: Path, height: int, scratch: Path, width: int = 1300) -> bool:
    """A headless Chromium screenshot of ``page``, cropped to ``height`` pixels; False without Chromium. The page is
    shown from a copy in which the scratch directory's path is left out (runs/<run>, not /tmp/.../runs/<run>)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        return False
    with tempfile.TemporaryDirectory() as profile:
        shown = page.parent / f"shown-{page.name}"  # beside it: links to the run's other files still resolve
        shown.write_text(page.read_text().replace(f"{scratch.resolve()}/", "").replace(f"{scratch}/", ""))
        full = Path(profile) / "shot.png"
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        flags += ["--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
        flags += [f"--user-data-dir={profile}", f"--window-size={width},{height + 200}", "--virtual-time-budget=3000"]
        subprocess.run(
            [browser, *flags, f"--screenshot={full}", shown.resolve().as_uri()],
            check=True,
            capture_output=True,
            timeout=120,
        )
        from PIL import Image

        Image.open(full).crop((0, 0, width, height)).save(out, optimize=True)
    return True


# ---- where and when: machine.json ----------------------------------------------------------------------
def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import torch

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": platform.system(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def commit() -> str:
    """The checkout's commit; on a machine that got a copy of the files without git, $TINYCALC_COMMIT."""
    if os.environ.get("TINYCALC_COMMIT"):
        return os.environ["TINYCALC_COMMIT"]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    # what a measurement writes (the figures, their images, the Markdown they render into) does not make it dirty:
    # the second section of one `--only a b` call was measured by the same code as the first
    written = (":(exclude)docs/measured", ":(exclude)docs/images", ":(exclude)*.md")
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *written],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return (head.stdout.strip() or "unknown") + (" (+ uncommitted changes)" if dirty else "")


def load_text(when: dict) -> str:
    """A section's 1-minute load average at its start and end, as the docs write it ("1.0 / 1.2"; "—" unrecorded)."""
    return " / ".join(f"{x:.1f}" for x in when.get("load", [])) or "—"


def block_machine(m: dict) -> str:
    """Every section's where and when, as one table (docs/results.md)."""
    machine = m.get("machine")
    if not machine:
        return not_measured("default")
    lines = [
        f"Measured on {machine_line(machine)}, by `python docs/regenerate.py` (each section's JSON is in "
        "[`measured/`](measured/)); each section's CPU is in the table:",
        "",
        "| section | measured | at commit | on | load (start, end) | what it runs |",
        "|---|---|---|---|---|---|",
    ]
    for name, when in sorted(machine["sections"].items()):
        load = load_text(when)
        cpu = when.get("cpu", "—")
        lines.append(f"| `{name}` | {when['date']} | {when['commit']} | {cpu} | {load} | {when['runs']} |")
    lines += [
        "",
        f"Load: the machine's 1-minute load average. Above {machine['machine']['cores']} (its cores), other work "
        "shared the cores, and the seconds measured then are upper bounds.",
    ]
    return "\n".join(lines)


def machine_line(machine: dict) -> str:
    """The machine of the latest CPU measurement: the same cores and software every time, the CPU not always."""
    x = machine["machine"]
    return f"{x['cores']}-core CPU machines (no GPU), {x['os']}, Python {x['python']}, torch {x['torch']}"


def measured_at(section: str):
    """The renderer of ``<!-- measured:when_SECTION -->``, a line beside a section's tables in docs/ saying when and at
    which commit it was measured, under what load, and the command that measures it again."""

    def block(m: dict) -> str:
        when = (m.get("machine") or {}).get("sections", {}).get(section)
        if not when:
            return not_measured(section)
        load = load_text(when)
        return (
            f"*`python docs/regenerate.py --only {section}`: measured {when['date']} at commit {when['commit']}, load "
            f"{load} (start / end), on the {m['machine']['machine']['cores']}-core {when.get('cpu', 'CPU')} machine of "
            "[where and when](results.md#where-and-when).*"
        )

    return block


# ---- text: the figures as the docs write them, and the blocks between their markers ---------------------
def pct(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}%}"


def secs(x: float) -> str:
    x = round(x)
    return f"{x} s" if x < 60 else f"{x // 60} min {x % 60} s"


def wrap(text: str, width: int = 120, subsequent_indent: str = "") -> str:
    """A paragraph on lines of at most ``width`` characters (a block on lines of its own), never breaking within
    a `code span`."""
    text = re.sub(r"`[^`]*`", lambda span: span[0].replace(" ", "\0"), text)
    lines = textwrap.wrap(
        text, width, subsequent_indent=subsequent_indent, break_long_words=False, break_on_hyphens=False
    )
    return "\n".join(line.replace("\0", " ") for line in lines)


def not_measured(section: str) -> str:
    return f"*Not measured yet: `python docs/regenerate.py --only {section}`.*"


def rate(score: dict) -> float:
    """A {right, n} score (calc.py --eval's, verify.py's) as a share."""
    return score["right"] / score["n"]


def reached(r: dict, key: str) -> str:
    """A run's step at 99% or 100% validation, or "never (best x%)"."""
    step = r[key]
    return f"{step:,}" if step is not None else f"never (best {pct(r['best_val'])}, at {r['best_val_step']:,})"


BLOCK = re.compile(r"(<!-- measured:(\w+) -->)(\n?)(.*?)(\n?)(<!-- /measured -->)", re.S)


def render(text: str, measured: dict, blocks: dict) -> str:
    """``text`` with every measured block re-rendered from ``measured`` by ``blocks[name]``: a block on lines of its
    own, or inline within a sentence (a KeyError names an unknown block)."""
    return BLOCK.sub(lambda b: b[1] + b[3] + blocks[b[2]](measured) + b[5] + b[6], text)


def blocks_in(text: str) -> list[str]:
    return [b[2] for b in BLOCK.finditer(text)]


def load_measured(folder: Path = MEASURED) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
