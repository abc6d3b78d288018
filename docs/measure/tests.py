"""The fast test suite, ``python -m pytest``: how long it takes and how many tests pass and skip (and why they skip).

Measured on a fresh clone: the suite's own tmp files aside, it writes nothing in the project.
"""

from __future__ import annotations

import re
from pathlib import Path

from .common import ROOT, not_measured, run, secs

COMMAND = "python -m pytest"
COST = "~4 min on 2 idle cores (much longer on shared ones)"
COUNTS = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def measure(scratch: Path) -> dict:
    """python -m pytest (the fast suite, every core): its wall time and its counts."""
    ran = run(["-m", "pytest", "-q", "-p", "no:cacheprovider"], ROOT, ok=(0, 1))
    last = ran.stdout.strip().splitlines()[-1]
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in COUNTS.findall(last)}
    return {"command": COMMAND, "seconds": ran.seconds, **counts}


def block_tests(m: dict) -> str:
    """The suite's duration and counts (docs/results.md, beside where and when it was measured)."""
    t = m.get("tests")
    if not t:
        return not_measured("tests")
    counts = ", ".join(f"{t[k]:,} {k}" for k in ("passed", "failed", "error", "skipped") if t.get(k))
    cores = (m.get("machine") or {}).get("machine", {}).get("cores", "?")
    return f"`{t['command']}` took {secs(t['seconds'])} on a fresh clone, {counts}, on {cores} otherwise idle cores."


BLOCKS = {"tests": block_tests}
