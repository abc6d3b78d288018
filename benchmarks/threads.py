"""How many CPU threads a training step wants: the step time at 1, 2, ... threads (up to the cores this process may
use), on a quiet machine and with ``busy`` background processes the benchmark starts itself (Python spin loops, each
wanting a whole core; killed after), for the default model, ``experiment=add10`` and a wide model
(``model.d_model=256``). And, with ``runs``, the whole default ``python train.py`` side by side: torch's default
(``threads=<cores>``) against the project's (training/threads.py), quiet and under the same load.

Used by ``python bench.py threads [--steps N --warmup N --repeat R]``. Each step is the model's real loss and
optimizer (the run's recipe) in a bare loop (benchmarks/train_speed.py's ``BareLoop``), timed alone; each figure is
the median step of ``repeat`` rounds, the thread counts taking turns. The load average (1 minute) is recorded
beside every figure: the machine may be shared.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from training.limits import machine_cores
from training.threads import DEFAULT_THREADS

MODELS = {  # name -> train.py overrides
    "default": [],
    "add10": ["experiment=add10"],
    "wide (d_model=256)": ["model.d_model=256"],
}
# one busy process: a core's worth of pure Python, until its parent (this benchmark) is gone, however it ended
SPIN = "import os; parent = os.getppid()\nwhile os.getppid() == parent: pass"


def load_average() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, ... up to ``cores``, and ``cores`` itself."""
    counts, n = [], 1
    while n < cores:
        counts.append(n)
        n *= 2
    return [*counts, cores]


@contextlib.contextmanager
def busy_processes(n: int):
    """``n`` background processes that each keep a core busy, for the block; each is ended (by its own id) after."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]
    try:
        time.sleep(0.5 if n else 0)  # running before the first step is timed
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def step_loop(overrides: list[str], workdir: Path):
    """The model of ``overrides`` as train.py builds it, in a bare loop of its real loss and optimizer."""
    from benchmarks.train_speed import BareLoop, Variant, assembled, device_batches

    cpu = torch.device("cpu")
    datamodule, module, clip = assembled([*overrides, "logger=none", "analysis=none"], workdir)
    stream = device_batches(datamodule, cpu)
    loop = BareLoop(module, module.teacher_forced_loss, stream, module.optim, clip, Variant("bare", "bare"), cpu)
    params = sum(p.numel() for p in module.parameters())
    return loop, params


def time_steps(loop, threads: int, steps: int, warmup: int) -> float:
    """The median seconds of ``steps`` steps after ``warmup``, at ``threads`` threads."""
    from benchmarks.train_speed import Clock

    torch.set_num_threads(threads)
    clock = Clock(torch.device("cpu"), warmup, steps)
    loop.run(clock, clock.total_steps)
    return statistics.median(clock.samples)


def bench_threads(steps: int = 60, warmup: int = 10, repeat: int = 3, busy: int = 2, say=print) -> dict:
    """The step-time table (module docstring): per model, per load, per thread count."""
    cores = machine_cores()
    counts = thread_counts(cores)
    before = torch.get_num_threads()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for model, overrides in MODELS.items():
                loop, params = step_loop(overrides, Path(tmp) / model.split()[0])
                for load in ("quiet", f"{busy} busy"):
                    with busy_processes(busy if load != "quiet" else 0):
                        samples: dict[int, list[float]] = {t: [] for t in counts}
                        loads = [load_average()]
                        for _ in range(repeat):
                            for t in counts:  # taking turns: a noisy neighbour slows them alike
                                samples[t].append(time_steps(loop, t, steps, warmup))
                        loads.append(load_average())
                    for t in counts:
                        ms = statistics.median(samples[t]) * 1000
                        rows.append({"model": model, "parameters": params, "load": load, "threads": t,
                                     "ms_per_step": round(ms, 2), "load_average": loads})  # fmt: skip
                    say(f"threads: {model}, {load}: " + ", ".join(f"{r['threads']}: {r['ms_per_step']} ms"
                                                              for r in rows[-len(counts):]))  # fmt: skip
    finally:
        torch.set_num_threads(before)
    for row in rows:  # each figure against one thread, same model and load
        one = next(r for r in rows if (r["model"], r["load"], r["threads"]) == (row["model"], row["load"], 1))
        row["over_one_thread"] = round(row["ms_per_step"] / one["ms_per_step"], 2)
    return {
        "cores": cores,
        "thread_counts": counts,
        "busy_processes": busy,
        "background_load": f"{busy} busy processes (a Python spin loop each)",
        "steps": steps,
        "warmup": warmup,
        "rounds": repeat,
        "default_threads": DEFAULT_THREADS,
        "rule": "training/threads.py: one thread unless threads= or OMP_NUM_THREADS says otherwise",
        "rows": rows,
    }


def bench_default_run(busy: int = 2, steps: int | None = None, say=print) -> dict:
    """The default ``python train.py`` (analysis=none logger=none, so only training differs) with torch's default of
    one thread per core (``threads=<cores>``, what every run had before training/threads.py) and with the project's
    default, quiet and under ``busy`` background processes: training seconds from each run's results.json.
    ``steps``: each run trains exactly that many steps (``trainer.max_steps=N target_accuracy=null``), for a
    machine too busy for whole runs."""
    from benchmarks.converge import timed_train

    cores = machine_cores()
    variants = {f"threads={cores} (torch's default)": [f"threads={cores}"], "default (training/threads.py)": []}
    common = ["analysis=none", "logger=none"]
    common += [f"trainer.max_steps={steps}", "target_accuracy=null"] if steps else []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for load in ("quiet", f"{busy} busy"):
            with busy_processes(busy if load != "quiet" else 0):
                for name, overrides in variants.items():
                    started_load = load_average()
                    wall, done, results = timed_train([*overrides, *common], Path(tmp) / f"{len(rows)}")
                    if done.returncode != 0:
                        raise RuntimeError(f"train.py failed: {done.stderr.strip().splitlines()[-1:]}")
                    rows.append({"run": name, "load": load, "train_seconds": results["train_seconds"],
                                 "wall_seconds": round(wall, 2), "steps": results["steps"],
                                 "load_average": [started_load, load_average()]})  # fmt: skip
                    say(f"threads: python train.py {' '.join(overrides)} ({load}): {results['train_seconds']} s")
    for row in rows:
        quiet = next(r for r in rows if r["run"] == row["run"] and r["load"] == "quiet")
        row["over_quiet"] = round(row["train_seconds"] / quiet["train_seconds"], 2)
    command = f"python train.py {' '.join(common)} [threads={cores}]"
    return {"command": command, "cores": cores, "busy_processes": busy, "rows": rows}
