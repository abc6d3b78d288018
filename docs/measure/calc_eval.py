"""``python calc.py --eval examples/problems.txt`` on the default run: the table it prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .common import ROOT, RUN, not_measured
from .default import default_run

COMMAND = "python calc.py --eval examples/problems.txt"
COST = "~5 s (+1 min without the default section)"


def measure(scratch: Path) -> dict:
    """python calc.py --eval examples/problems.txt on the default run (trained first when it is not there)."""
    run_dir = default_run(scratch)
    command = [sys.executable, "calc.py", "--ckpt", str(run_dir), "--eval", "examples/problems.txt"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=os.environ | {"COLUMNS": "120"})
    return {"command": COMMAND, "exit": done.returncode, "stdout": done.stdout.strip().replace(str(run_dir), RUN)}


def block_calc_eval(m: dict) -> str:
    c = m.get("calc_eval")
    if not c:
        return not_measured("calc_eval")
    return f"```\n$ {c['command']}   # exit status {c['exit']}\n{c['stdout']}\n```"


BLOCKS = {"calc_eval": block_calc_eval}
