"""Ctrl-C (SIGINT) and SIGTERM over the whole run: setup, training, test, analysis, report.

During training :class:`training.callbacks.GracefulStop` takes them (the first finishes the step and saves
``checkpoints/interrupted.ckpt``; a second stops at once). Everywhere else :class:`StopOnSignal` turns the
first one into :class:`Signalled`, which ``train.py`` catches in the phase it stopped, records a true status
for, and turns into one ``interrupted:`` line and the exit code ``128 + signal``: 130 for Ctrl-C, 143 for SIGTERM.

Outside a run -- while a command's imports run (a second or more: torch, Lightning), and for the whole of the
commands that hold no run (calc.py, analyse.py, verify.py, bench.py) -- :func:`guard_command`, a command's first
line, makes them one ``interrupted (Ctrl-C)`` line and the same exit code, never a traceback from inside whichever
module was loading. It raises SystemExit, so ``finally`` blocks still run (a half-written file is removed).

:class:`Signalled` is a BaseException that is not a KeyboardInterrupt: Lightning answers a KeyboardInterrupt with
``sys.exit(1)`` (no line, no status), but re-raises anything else once its callbacks have seen it.

These handlers are the run's only ones: :class:`training.callbacks.TheRunsSignals` keeps Lightning's SIGTERM handler
off. In a multi-process run every process stops at the same step whichever one a signal reached (GracefulStop), a stop
at once is passed to the others (:func:`stop_at_once`), and only the first process prints, records and sets the exit
code.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

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
_received: list[int] = []  # every signal the run's handlers took in this process
_children: list = []  # the run's processes this one started (Lightning's launcher): know_the_peers
_parent: list[int] = []  # the run's first process, where this one is its child
FIRST_PROCESS = "TINYCALC_FIRST_PROCESS"  # the first process's pid, for the processes Lightning starts from it


def received(signum: int) -> None:
    """The run's handlers took ``signum`` in this process."""
    _received.append(signum)


def was_signalled() -> bool:
    return bool(_received)


def stop_at_once(signum: int) -> None:
    """Raise :class:`Signalled` -- once per process: a further signal while the run writes its true status is
    ignored (SIGKILL, or Ctrl-\\ (SIGQUIT), still end the process at once). The run's other processes get the same
    signal: stopped in the middle of whatever they wait for with this one, they stop too, not after a timeout."""
    received(signum)
    if _stopping:
        return
    _stopping.append(signum)
    for pid in [child.pid for child in _children] + _parent:
        try:
            os.kill(pid, signum)
        except OSError:  # already gone
            pass
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


def a_worker_process() -> bool:
    """Is this a process of a multi-process run other than the first (Lightning's launcher and torchrun set
    LOCAL_RANK / RANK)? The first one speaks for the run: its line, its record, its exit code."""
    return os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("RANK", "0") != "0"


def a_peer_ended(wait: float = 1.0) -> str | None:
    """Which of the run's other processes on this machine has ended early, and how ("process 1 (killed by
    SIGKILL)"); None while they all run or ended well. Waits up to ``wait`` seconds for it: a process killed in a
    collective closes its sockets a moment before it is seen to have ended."""
    deadline = time.monotonic() + wait
    while True:
        for rank, child in enumerate(_children, start=1):
            if child.poll():  # None: it runs; 0: it ended well (the others leave after the test)
                code = child.returncode
                how = f"killed by {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"exit {code}"
                return f"process {rank} ({how})"
        if _parent and os.getppid() != _parent[0]:
            return "process 0"
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def mark_the_first_process() -> None:
    """Before the trainer fits: the processes Lightning's launcher starts inherit this one's pid (FIRST_PROCESS)."""
    if not a_worker_process():
        os.environ[FIRST_PROCESS] = str(os.getpid())


def know_the_peers(trainer) -> None:
    """The peers a signal that stops this process at once is passed to: the first process's children (Lightning's
    launcher, once it has started them), or the first process itself, where it is this one's parent (torchrun's agent
    passes a SIGTERM to every process itself)."""
    _children[:] = getattr(trainer.strategy.launcher, "procs", None) or []
    first = os.environ.get(FIRST_PROCESS, "")
    _parent[:] = [int(first)] if a_worker_process() and first.isdigit() and int(first) == os.getppid() else []


def guard_command(said: str = "") -> None:
    """A command's first line: from here to its end (or :func:`lift_guard`), Ctrl-C or SIGTERM prints one line,
    ``interrupted (Ctrl-C)`` + ``said``, and exits with 128 + the signal (SystemExit: ``finally`` blocks run; further
    signals are ignored meanwhile). A signal the shell ignores (``nohup``, a background job's Ctrl-C) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        return

    def stop_command(signum, frame) -> None:
        if _stopping:
            return
        _stopping.append(signum)
        print(f"interrupted ({signal_name(signum)}){said}", file=sys.stderr, flush=True)
        raise SystemExit(exit_code(signum))

    for signum in SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, stop_command)
    _guards[:] = [stop_command]


_guards: list = []  # the handler guard_command installed, while it is installed


def lift_guard() -> None:
    """Python's own handlers back (a KeyboardInterrupt for Ctrl-C), where :func:`guard_command` had set its own: for
    a command that takes the signals over from here (train.py: :class:`StopOnSignal`)."""
    for signum, default in zip(SIGNALS, (signal.default_int_handler, signal.SIG_DFL), strict=True):
        if _guards and signal.getsignal(signum) is _guards[0]:
            signal.signal(signum, default)
    _guards.clear()
