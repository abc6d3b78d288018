"""Where a run's seconds go: wall seconds per phase of train.py, for results.json's ``phases``."""

from __future__ import annotations

import time


class Phases:
    """Laps of one run: ``startup`` (from train.py's first line -- the interpreter's own start is before it --
    through its imports and the config, to the run's start), then each ``lap(name)`` the seconds since the last;
    ``seconds`` adds ``total``, from train.py's first line."""

    def __init__(self, process_started: float, run_started: float):
        self.process_started, self.last = process_started, run_started
        self.laps = {"startup": run_started - process_started}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + now - self.last
        self.last = now

    @property
    def seconds(self) -> dict[str, float]:
        return {**{k: round(v, 2) for k, v in self.laps.items()}, "total": round(self.last - self.process_started, 2)}
