"""One answer as a whole command on the default run: ``python calc.py --ckpt RUN 123+456`` from a fresh interpreter to
its exit, beside the same with Lightning imported first (what each answer cost while calc.py imported it)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.calc_start import bench_calc

from .common import not_measured
from .default import default_run

REPEAT = 5
COMMAND = f"python bench.py calc --ckpt runs/<run> --repeat {REPEAT}"
COST = "~20 s (+1 min without the default section)"


def measure(scratch: Path) -> dict:
    """bench.py calc's figures on the default run (trained first when it is not there)."""
    return {"command": COMMAND} | bench_calc(str(default_run(scratch)), 3, REPEAT, say=lambda *_: None)


def block_calc_start(m: dict) -> str:
    c = m.get("calc_start")
    if not c:
        return not_measured("calc_start")
    now, before = c["median_s"]["calc.py"], c["median_s"]["with Lightning imported first"]
    return (
        f"One answer, `python calc.py --ckpt runs/<run> {c['problem']}` as a whole command, takes **{now:.2f} s** "
        f"(the median of {REPEAT} fresh interpreters): it imports neither Lightning nor torch.compile's machinery "
        f"(`tests/test_calc.py` checks). The same command with Lightning imported first, as every answer paid before, "
        f"takes {before:.2f} s (×{c['speedup']:.1f}). Measured with `{c['command']}`."
    )


BLOCKS = {"calc_start": block_calc_start}
