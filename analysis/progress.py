"""Progress of a long command, shown as training shows it: what it is doing, a bar, steps done out of how many,
and the time so far -- in the terminal only (on stderr). When stderr is not a terminal (a pipe, a log, a notebook,
a test) nothing is shown: the command's own output is all there is. One helper for every long command: analyse.py
and the end-of-run analysis (each analysis, each digit's circuit, each length), verify.py's suites, a sweep's
summary and docs/regenerate.py's sections.

    with stage("analysis", total=len(analyses)) as progress:
        for analysis in analyses:
            progress.doing(analysis.name)
            ...
            progress.advance()

    for run in track(digit_runs, "circuits", part=lambda run: f"digit {run.digit}"):
        ...

A stage begun inside another adds its own line under it for as long as it runs; the outermost one stays, finished.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

_shown = None  # the rich Progress on the terminal now, shared by the stages inside the one that began it


class Stage:
    """One line of progress: :meth:`doing` names the current part, :meth:`advance` counts parts done."""

    def __init__(self, what: str, progress=None, task=None):
        self.what, self._progress, self._task = what, progress, task

    def doing(self, part: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=f"{self.what}: {part}")

    def advance(self, steps: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, steps)


def _start():
    """A rich Progress started on stderr, or None when stderr is not a terminal or something else draws there."""
    from rich.console import Console
    from rich.errors import LiveError
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        return None
    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(bar_width=12),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    try:
        progress.start()
    except LiveError:  # another live display on this console: stay quiet rather than draw over it
        return None
    return progress


@contextmanager
def stage(what: str, total: int | None = None) -> Iterator[Stage]:
    """A line of progress for the block (see the module's docstring); ``total``: the parts, None if unknown."""
    global _shown
    owner = _shown is None
    progress = _start() if owner else _shown
    if progress is None:
        yield Stage(what)
        return
    task = progress.add_task(what, total=total)
    if owner:
        _shown = progress
    try:
        yield Stage(what, progress, task)
    finally:
        if owner:
            progress.update(task, description=what)
            progress.stop()
            _shown = None
        else:
            progress.remove_task(task)


def track(items: Iterable, what: str, total: int | None = None, part: Callable[..., str] | None = None) -> Iterator:
    """Each of ``items``, with a line of progress counting them (``total``: their number, when ``items`` has no
    len(); ``part``: an item's name, shown while it is worked on)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    with stage(what, total) as progress:
        for item in items:
            if part is not None:
                progress.doing(part(item))
            yield item
            progress.advance()
