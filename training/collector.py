"""Python's cycle collector and what a command imports: one rule, used by every command that runs a model
(train.py through training/run.py, analyse.py, calc.py, verify.py).

A command's imports (torch, Lightning, Hydra, matplotlib) make 200,000-250,000 objects that live until it exits.
Python's cycle collector goes through every one of them at each full collection -- 0.05-0.17 s each, several while
a command works -- and once more as the interpreter exits, and never finds one to free. ``gc.freeze()`` moves the
objects alive at that moment out of its scans (reference counting still frees each one as usual); what the work
makes is collected as before. Measured with ``gc.callbacks``, and the exit from ``main``'s return to the process's
end (docs/performance.md):

    python train.py                        full collections 1.19 s -> 0.23 s
    python analyse.py <the default run>    full collections 0.38 s -> 0.16 s; the exit 0.72 s -> 0.17 s
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_alive() -> None:
    """What is alive now out of the collector's scans: call it once a command has imported, and built, what lives
    to its end."""
    gc.freeze()


@contextmanager
def alive_frozen() -> Iterator[None]:
    """While a command's work runs: what is alive as it begins frozen (:func:`freeze_alive`, which the work may call
    again once it has built more); every frozen object back in the scans after, so a process that goes on (a
    sweep's next run, a test) still frees what the work left."""
    freeze_alive()
    try:
        yield
    finally:
        gc.unfreeze()


def exit_quickly() -> None:
    """A command's last line: everything alive frozen, so the interpreter's last collections, which free nothing the
    operating system would not, skip it. The exit is otherwise normal: atexit handlers, threads' joins and the
    streams' flush all run."""
    freeze_alive()
