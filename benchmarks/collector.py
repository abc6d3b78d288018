"""What Python's cycle collector costs a command over the objects its imports made, and what training/collector.py
saves: one full collection (``gc.collect()``, as the collector runs several while a command works) and the
interpreter's exit, with those objects frozen (as every command freezes them before its work and at its last line)
and not.

Used by ``python bench.py collector [--repeat R]``. Each figure comes from a fresh interpreter that imports what the
command imports before its work, and nothing more; the two kinds take turns, R rounds, medians.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORTS = {  # command -> what it has imported when its work begins
    "train.py": "train, training.module, training.assemble, analysis.pipeline",
    "analyse.py": "analyse, model.checkpoint, analysis.pipeline, analysis.html_report",
}
# one interpreter: the imports; a full collection timed (the fastest of 3); its last line the exit's start
CHILD = """\
import gc, json, time
import {modules}
from training.collector import freeze_alive
gc.collect()
if {frozen}:
    freeze_alive()
tracked = len(gc.get_objects())
times = []
for _ in range(3):
    started = time.perf_counter()
    gc.collect()
    times.append(time.perf_counter() - started)
print(json.dumps({{"scanned": tracked, "collect_ms": 1000 * min(times), "exit_at": time.time()}}), flush=True)
"""


def one_interpreter(modules: str, frozen: bool) -> dict:
    """Objects a full collection scans, its milliseconds, and the milliseconds from the last line to the end."""
    code = CHILD.format(modules=modules, frozen=frozen)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    ended = time.time()  # the process has exited: run() waits for it
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"the interpreter importing {modules} failed: {done.stderr.strip()[-500:]}")
    found = json.loads(done.stdout)
    exit_at = found.pop("exit_at")
    return found | {"exit_ms": 1000 * (ended - exit_at)}


def bench_collector(repeat: int = 3, say=print) -> dict:
    """Per command: a full collection and the exit, frozen and not (``repeat`` rounds, taking turns, medians)."""
    rows = []
    for command, modules in IMPORTS.items():
        trials: dict[bool, list[dict]] = {False: [], True: []}
        for r in range(repeat):
            for frozen in (False, True):
                say(f"collector: {command}'s imports, {'frozen' if frozen else 'not frozen'}, round {r + 1}/{repeat}")
                trials[frozen].append(one_interpreter(modules, frozen))
        median = {
            frozen: {k: statistics.median(t[k] for t in found) for k in found[0]} for frozen, found in trials.items()
        }
        rows.append(
            {
                "command": command,
                "imports": modules,
                "scanned": int(median[False]["scanned"]),
                "scanned_frozen": int(median[True]["scanned"]),
                "collect_ms": round(median[False]["collect_ms"], 1),
                "collect_ms_frozen": round(median[True]["collect_ms"], 1),
                "exit_ms": round(median[False]["exit_ms"]),
                "exit_ms_frozen": round(median[True]["exit_ms"]),
            }
        )
    return {"repeat": repeat, "rows": rows}
