"""How many CPU threads torch computes with: the one place that says it, used by every command that runs a model
(train.py through training/assemble.py, calc.py, analyse.py, verify.py, bench.py, the notebooks' lessons.py).

The rule: **one thread**, unless asked otherwise -- ``threads=N`` on train.py, or ``OMP_NUM_THREADS`` in the
environment of any command. torch's own default, one thread per core, makes each step of a model this small wait
for every core at every operation: on an idle 2-core machine a second thread is 1.2-1.75x faster, but when other
work keeps the cores busy each step waits for a descheduled thread, 1.45-2x slower, and whole runs took 4x their
quiet time against 1.7x at one thread (``python bench.py threads`` and ``threads_runs`` measure both, with a
background load they start themselves; docs/performance.md has the tables). torch is imported when the threads
are set, not before.
"""

from __future__ import annotations

import os

from training.limits import machine_cores

DEFAULT_THREADS = 1  # the rule (see above): measured by benchmarks/threads.py
SLOW_SHARE = 0.5  # a run whose threads get less than this share of a core each is slowed by other work


def wanted_threads(requested: int | None = None) -> int:
    """The thread count a command uses: ``requested`` (train.py's ``threads=``) when given, else
    ``OMP_NUM_THREADS`` when it is set to a whole number >= 1, else :data:`DEFAULT_THREADS`; never more than
    the cores this process may use."""
    if requested is None:
        env = os.environ.get("OMP_NUM_THREADS", "").strip()
        requested = int(env) if env.isdigit() and int(env) >= 1 else DEFAULT_THREADS
    return max(1, min(requested, machine_cores()))


def use_threads(requested: int | None = None) -> int:
    """Set torch's CPU threads by the rule (:func:`wanted_threads`); returns the count set."""
    import torch

    threads = wanted_threads(requested)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


def slow_steps_note(cpu_seconds: float, wall_seconds: float, threads: int, steps: int) -> str | None:
    """One line when ``steps`` steps that took ``wall_seconds`` got less than :data:`SLOW_SHARE` of a core per thread
    (``cpu_seconds`` of the process's CPU time): other work is using the cores. None when they ran at full speed."""
    if wall_seconds <= 0 or threads < 1:
        return None
    share = cpu_seconds / (wall_seconds * threads)
    if share >= SLOW_SHARE:
        return None
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    advice = (
        f"threads=1 (or fewer than {threads}) is faster while the cores are busy"
        if threads > 1
        else "it runs at full speed once the other work ends; nothing in the run needs changing"
    )
    return (
        f"note: the first {steps} steps got {int(share * 100)}% of a core per thread ({threads} thread"
        f"{'' if threads == 1 else 's'}, {machine_cores()} cores{load}): other work is using this machine, so steps "
        f"are slower than it can give; {advice}"
    )
