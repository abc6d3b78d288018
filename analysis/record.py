"""The one writer of what analyses found: files through RunDir/SweepDir, the same artefacts logged to wandb.

Figures are closed once written; tables go to CSV (and a wandb Table); maps to PNG + JSON (and wandb images).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
from pathlib import Path

from analysis.metric import Analysis
from storage.rundir import RunDir, SweepDir, write_atomically
from training.loggers import quiet_wandb, wandb_loggers

DPI = 90
# results.json's headline numbers, in a wandb run's summary too (Recorder.the_run)
HEADLINE = ("test_exact_match", "test_digit_accuracy", "n_params", "steps", "train_seconds", "total_seconds",
            "tokens_per_second")  # fmt: skip


def save_figure(figure, path: Path) -> Path:
    """A matplotlib Figure -> PNG at ``path`` (written beside, then renamed)."""
    return write_atomically(path, lambda tmp: figure.savefig(tmp, dpi=DPI, format="png"))


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> Path:
    text = io.StringIO()
    writer = csv.DictWriter(text, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return RunDir.write_text(path, text.getvalue())


class Recorder:
    """Writes into one run directory and logs to that run's wandb loggers (if any)."""

    def __init__(self, run_dir: RunDir, loggers=()):
        self.run_dir, self.wandb = run_dir, wandb_loggers(loggers)

    def record(self, analysis: Analysis, rows: list, figure=None) -> dict[str, Path]:
        """An analysis's rows as <name>.csv and its figure as <name>.png; the same to wandb. Returns the paths."""
        written = {}
        table = analysis.table(rows)
        if table:
            columns = [c.key for c in analysis.columns]
            written["table"] = write_csv(self.run_dir.table(analysis.name), columns, table)
            for logger in self.wandb:
                logger.log_table(key=f"{analysis.name}/table", columns=columns, data=[list(r.values()) for r in table])
        if figure is not None:
            written["figure"] = save_figure(figure, self.run_dir.figure(analysis.name))
            for logger in self.wandb:
                logger.log_image(key=f"{analysis.name}/{analysis.figure_key}", images=[str(written["figure"])])
        return written

    def attention_maps(self, maps: dict, figures: list, tag: str, step: int | None = None) -> list[Path]:
        """One layer's grid per PNG (attention/<tag>_layer<i>.png), the weights as attention/<tag>.json."""
        paths = [save_figure(fig, self.run_dir.attention_image(tag, i)) for i, fig in enumerate(figures)]
        data = self.run_dir.write_json(self.run_dir.attention_data(tag), {"tag": tag, "step": step, **maps}, None)
        for logger in self.wandb:
            for layer, path in enumerate(paths):
                logger.log_image(key=f"attention/layer{layer}", images=[str(path)], caption=[tag], step=step)
            # in the wandb run's own folder, which it syncs whole (wandb.save links it there too, with a warning line)
            kept = Path(logger.experiment.dir) / data.relative_to(self.run_dir.path)
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(data, kept)
        return paths

    def page(self, path: Path) -> None:
        """The run's report.html (its lab included) in each wandb run, as an HTML panel: a run synced to wandb
        carries the page in which its model runs."""
        if self.wandb:
            import wandb

            html = wandb.Html(path.read_text())  # the page this run just wrote
            for logger in self.wandb:
                logger.experiment.log({"report": html})

    def the_run(self, page: Path, results: dict) -> None:
        """The finished run in each wandb run: its page (:meth:`page`), its headline numbers in the summary, and its
        files (checkpoints, record, report, figures: RunDir.own_files) as one artifact, ``run-<wandb id>``."""
        if not self.wandb:
            return
        import wandb

        self.page(page)
        self.summary({key: results[key] for key in HEADLINE if isinstance(results.get(key), (int, float))})
        for logger in self.wandb:
            run = logger.experiment
            artifact = wandb.Artifact(f"run-{run.id}", type="run", metadata={"run_dir": str(self.run_dir.path)})
            for path in self.run_dir.own_files():
                artifact.add_file(str(path), name=path.relative_to(self.run_dir.path).as_posix())
            run.log_artifact(artifact)

    def summary(self, values: dict) -> None:
        """Headline numbers in each wandb run's summary."""
        for logger in self.wandb:
            for key, value in values.items():
                logger.experiment.summary[key] = value


def record_sweep(
    sweep: SweepDir, columns: list[str], rows: list[dict], markdown: str, figure, wandb: dict | None
) -> None:
    """A sweep's summary: CSV, Markdown and figure in the sweep directory; with ``wandb`` (its jobs' logger.wandb
    settings), the same table and figure as a wandb run of its own, job_type summary, in the sweep's group, with the
    jobs' project, entity and mode."""
    write_csv(sweep.summary_csv, columns, rows)
    RunDir.write_text(sweep.summary_md, markdown)
    save_figure(figure, sweep.summary_figure)
    if wandb is None:
        return
    import wandb as wb

    quiet_wandb()  # its banner lines too, as the runs' own (training/loggers.py)
    run = wb.init(
        project=wandb.get("project") or "tinycalc",
        entity=wandb.get("entity"),
        group=sweep.path.name,
        name="sweep-summary",
        job_type="summary",
        tags=list(wandb.get("tags") or []),
        dir=str(sweep.path),
        mode=wandb.get("mode") or os.environ.get("WANDB_MODE", "offline"),
    )
    run.log(
        {
            "sweep/summary": wb.Table(columns=columns, data=[[row[c] for c in columns] for row in rows]),
            "sweep/figure": wb.Image(str(sweep.summary_figure)),
        }
    )
    run.finish()
