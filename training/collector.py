"""Python's cycle collector and what a command imports: one rule, used by every command that runs a model
(train.py through training/run.py, analyse.py, calc.py, verify.py).

A command's imports (torch, Lightning, Hydra, matplotlib) make 180,000-380,000 objects that live until it exits.
Python's cycle collector goes through every one of them at each full collection -- 0.09-0.17 s each, several while
a command works -- and once more as the interpreter exits, and never finds one to free. ``gc.freeze()`` moves the
objects alive at that moment out of its scans (reference counting still frees each one as usual); what the work
makes is collected as before. ``python bench.py collector`` measures a full collection and the exit over each
command's imports, frozen and not (the table: docs/performance.md, "What is in the code for speed").

A process that goes on -- a notebook calling ``analyse.main`` in a loop, a sweep's next job, the test suite -- must
not freeze what an earlier work left: its cycles, back in the oldest generation, wait there for a full collection
that seldom comes, and a freeze would keep them from it again, call after call (~47,000 objects and ~24 MB more per
``analyse.main``, without end). So every work after the first collects before it freezes: only what is alive is
frozen, and the process stays flat (tests/test_collector.py; docs/reliability.md). A command's first (and usually
only) work skips that collection: nothing earlier has left anything, and it would cost the command 0.05-0.15 s.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

_worked = False  # has a command's work run in this process already (alive_frozen)


def freeze_alive() -> None:
    """What is alive now out of the collector's scans: call it once a command has imported, and built, what lives
    to its end."""
    gc.freeze()


@contextmanager
def alive_frozen() -> Iterator[None]:
    """While a command's work runs: what is alive as it begins frozen (:func:`freeze_alive`, which the work may call
    again once it has built more); every frozen object back in the scans after, so a process that goes on (a
    sweep's next run, a test) still frees what the work left. A work that is not the process's first collects
    before it freezes: what the earlier ones left is freed, not frozen with what is alive."""
    global _worked
    if _worked:
        gc.collect()
    _worked = True
    freeze_alive()
    try:
        yield
    finally:
        gc.unfreeze()


def exit_quickly(code: int = 0) -> NoReturn:
    """A command's last line: everything alive frozen, so the interpreter's last collections, which free nothing the
    operating system would not, skip it; then ``sys.exit(code)``. The exit is otherwise normal: atexit handlers,
    threads' joins and the streams' flush all run."""
    freeze_alive()
    sys.exit(code)
