"""What answering one problem costs as a whole command: ``python calc.py --ckpt RUN 123+456``, from a fresh interpreter
to its exit, as it is (no Lightning, no torch._dynamo: data/build.py imports the datamodule only where training
asks for it) and with Lightning imported first, which is what every answer cost while ``import model.checkpoint``
pulled it in.

Used by ``python bench.py calc --ckpt RUN [--repeat R]``. The two kinds take turns, R rounds; medians, their ratio.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = "123456789+456789123"  # cut to the model's width: 123+456 for the calculator
# calc.py run as itself, after an import or none: runpy keeps its ``__main__`` and its exit
LAUNCH = "import runpy, sys{extra}; sys.argv[0] = 'calc.py'; runpy.run_path({calc!r}, run_name='__main__')"
KINDS = {"calc.py": "", "with Lightning imported first": ", lightning"}


def problem_for(digits: int) -> str:
    """PROBLEM at ``digits`` digits: 12+45 for a 2-digit model."""
    a, b = PROBLEM.split("+")
    return f"{a[:digits]}+{b[:digits]}"


def whole_seconds(ckpt: str, problem: str, extra: str) -> tuple[float, str]:
    """One fresh interpreter answering ``problem``: its wall seconds and what it printed."""
    command = [sys.executable, "-c", LAUNCH.format(extra=extra, calc=str(ROOT / "calc.py")), "--ckpt", ckpt, problem]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done.stdout.strip()


def bench_calc(ckpt: str, digits: int, repeat: int, say=print) -> dict:
    """Median whole-command seconds of each kind over ``repeat`` rounds taking turns (a ``digits``-digit problem),
    and their ratio."""
    problem = problem_for(digits)
    seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
    answers = set()
    for round_ in range(repeat):
        for kind, extra in KINDS.items():
            took, answer = whole_seconds(ckpt, problem, extra)
            seconds[kind].append(took)
            answers.add(answer)
        say(f"calc: round {round_ + 1}/{repeat}")
    median = {kind: statistics.median(times) for kind, times in seconds.items()}
    before, now = median["with Lightning imported first"], median["calc.py"]
    return {"problem": problem, "answers": sorted(answers), "seconds": seconds, "median_s": median,
            "speedup": before / now}  # fmt: skip
