"""Ctrl-C (SIGINT) and SIGTERM over the whole run: setup, training, test, analysis, report.

During training :class:`training.callbacks.GracefulStop` takes them (the first finishes the step and saves
``checkpoints/interrupted.ckpt``; a second stops at once). Everywhere else :class:`StopOnSignal` turns the
first one into :class:`Signalled`, which ``train.py`` catches in the phase it stopped, records a true status
for, and turns into one ``interrupted:`` line and the exit code ``128 + signal``: 130 for Ctrl-C, 143 for SIGTERM.

:class:`Signalled` is a BaseException that is not a KeyboardInterrupt: Lightning answers a KeyboardInterrupt with
``sys.exit(1)`` (no line, no status), but re-raises anything else once its callbacks have seen it.
"""

from __future__ import annotations

import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Signalled(BaseException):
    """A signal stopped the run at once (not at a step boundary); ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(signum: int) -> int:
    """The shell's convention: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + int(signum)


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


_stopping: list[int] = []  # the signal this process is stopping on, once one has stopped it at once


def stop_at_once(signum: int) -> None:
    """Raise :class:`Signalled` -- once per process: a further signal while the run writes its true status is
    ignored (SIGKILL, or Ctrl-\\ (SIGQUIT), still end the process at once)."""
    if _stopping:
        return
    _stopping.append(signum)
    raise Signalled(signum)


class StopOnSignal:
    """While active, SIGINT or SIGTERM stops the run at once (:func:`stop_at_once`).

    Used as a context manager; does nothing outside the main thread (where Python cannot set handlers).
    """

    def __init__(self):
        self._previous: dict[int, object] = {}

    @staticmethod
    def handle(signum, frame) -> None:
        stop_at_once(signum)

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self.handle) for s in SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}
