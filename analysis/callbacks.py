"""Lightning callbacks that watch the heads while the model trains."""

from __future__ import annotations

import time
from pathlib import Path

import lightning as L

from analysis.maps import checked_probes, probe_maps
from analysis.record import Recorder
from storage.rundir import RunDir


class AttentionMaps(L.Callback):
    """Draw every layer x head attention pattern of the probe problems every ``every_n_val`` validations.

    probes: problems such as ["999+1"]; None = the task's own (carries rippling through every place).
    The sanity check is skipped, and so is a validation where training ends (the last step, or a stop such as
    reaching the target): the end-of-run analysis draws the final maps, on the best weights. Listed after the
    early-stopping callback (configs/callbacks/default.yaml), it sees that callback's stop.
    """

    def __init__(self, run_dir: str | Path, probes: list[str] | None = None, every_n_val: int = 3):
        if not isinstance(every_n_val, int) or isinstance(every_n_val, bool) or every_n_val < 1:
            raise ValueError(f"every_n_val={every_n_val!r}: must be a whole number >= 1")
        self.probes = None if probes is None else [str(p) for p in probes]
        self.run_dir, self.every_n_val = RunDir(run_dir), every_n_val
        self.n_validations = 0
        self.seconds = 0.0  # time spent drawing, reported in results.json as maps_seconds

    def probes_for(self, pl_module) -> list[str]:
        """The probe problems, checked against the model's format (ValueError naming the bad one)."""
        self.probes = checked_probes(pl_module, self.probes)
        return self.probes

    def setup(self, trainer: L.Trainer, pl_module, stage: str) -> None:
        self.probes_for(pl_module)  # a bad probe fails now, before training, not at step 500

    def on_validation_end(self, trainer: L.Trainer, pl_module) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        self.n_validations += 1
        ending = trainer.should_stop or trainer.global_step >= trainer.max_steps
        if self.n_validations % self.every_n_val == 0 and not ending:
            from analysis.plots import map_figures  # matplotlib: only once a map is drawn

            started, step, tag = time.perf_counter(), trainer.global_step, f"step{trainer.global_step:06d}"
            maps = probe_maps(pl_module, self.probes)
            Recorder(self.run_dir, trainer.loggers).attention_maps(maps, map_figures(maps, tag), tag, step)
            self.seconds += time.perf_counter() - started
