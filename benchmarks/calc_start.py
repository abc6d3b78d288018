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
PROBLEM = "123+456"
# calc.py run as itself, after an import or none: runpy keeps its ``__main__`` and its exit
LAUNCH = "import runpy, sys{extra}; sys.argv[0] = 'calc.py'; runpy.run_path({calc!r}, run_name='__main__')"
KINDS = {"calc.py": "", "with Lightning imported first": ", lightning"}


def whole_seconds(ckpt: str, extra: str) -> tuple[float, str]:
    """One fresh interpreter answering PROBLEM: its wall seconds and what it printed."""
    command = [sys.executable, "-c", LAUNCH.format(extra=extra, calc=str(ROOT / "calc.py")), "--ckpt", ckpt, PROBLEM]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done.stdout.strip()


def bench_calc(ckpt: str, repeat: int, say=print) -> dict:
    """Median whole-command seconds of each kind over ``repeat`` rounds taking turns, and their ratio."""
    seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
    answers = set()
    for round_ in range(repeat):
        for kind, extra in KINDS.items():
            took, answer = whole_seconds(ckpt, extra)
            seconds[kind].append(took)
            answers.add(answer)
        say(f"calc: round {round_ + 1}/{repeat}")
    median = {kind: statistics.median(times) for kind, times in seconds.items()}
    before, now = median["with Lightning imported first"], median["calc.py"]
    return {"problem": PROBLEM, "answers": sorted(answers), "seconds": seconds, "median_s": median,
            "speedup": before / now}  # fmt: skip
