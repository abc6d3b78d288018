"""Hydra callbacks run when a multirun ends: they only call the sweep pipeline (analysis/sweep.py, compare.py)."""

from __future__ import annotations

import textwrap

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from storage.rundir import SweepDir


class SweepSummary(Callback):
    """When a multirun ends: its conclusion in the terminal, its runs side by side (sweep_summary.*) and its page
    (sweep_report.html)."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from analysis.conclusion import conclude
        from analysis.html_report import Damage, write_sweep_report
        from analysis.progress import stage
        from analysis.sweep import record_summary, summarise
        from analysis.sweep_length import record_length_sweep

        sweep = SweepDir(config.hydra.sweep.dir)
        damage = Damage()
        with stage("sweep summary", total=3) as progress:  # in the terminal only (analysis/progress.py)
            progress.doing("reading the runs")
            rows = summarise(sweep, damage)  # what is readable: a job with a damaged file counts as failed
            progress.advance()
            progress.doing("tables and figures")
            record_summary(sweep, rows)
            drawn = record_length_sweep(sweep, rows)
            progress.advance()
            progress.doing("the page")
            page = write_sweep_report(sweep.path, rows, damage=damage)
            progress.advance()
        if drawn:
            print(f"length by run: {drawn}")
        print("conclusion:")  # what the sweep found, as sweep_summary.md and the page say it
        for line in conclude(rows):
            print(textwrap.fill(line, 100, initial_indent="  - ", subsequent_indent="    "))
        failed = sum(row["status"] != "ok" for row in rows)
        print(f"sweep summary: {sweep.summary_md} ({len(rows)} runs, {failed} failed)")
        damage.warn()  # one line per damaged file
        print(f"sweep report: {page}")


class HeadCountComparison(Callback):
    """experiment=why_multi_head: one head against four, learning curves and final maps side by side."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from analysis.compare import compare

        sweep = SweepDir(config.hydra.sweep.dir)
        print("why multiple heads?")
        for line in compare(sweep):
            print(f"  {line}")
        print(f"  figure: {sweep.comparison_figure}")
