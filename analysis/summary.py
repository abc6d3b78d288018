"""The end-of-run summary in the terminal: a rich table of what was learned and what the heads do."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from data.problems import ProblemFormat


def print_summary(results: dict, console: Console | None = None) -> None:
    # piped or redirected, rich would assume 80 columns and wrap (cutting the run directory in two)
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title="tinycalc run", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    fmt = results["data"]
    table.add_row(
        "task",
        f"{fmt['digits']}-digit '{fmt['operators']}', answer {'reversed' if fmt['reverse_answer'] else 'plain'}"
        + (" with working" if ProblemFormat(**fmt).work_len else ""),
    )
    table.add_row(
        "model",
        f"{results['n_layers']} layers x {results['n_heads']} heads of {results['head_dim']} dims "
        f"({results['n_params']:,} parameters)",
    )
    table.add_row(
        "training",
        f"{results['steps']} steps in {results['train_seconds']:.1f}s ({results['tokens_per_second']:,} tokens/s)",
    )
    table.add_row(
        "test exact-match",
        f"{results['test_exact_match']:.2%} of {results['n_test']:,} held-out problems "
        f"(per digit {results['test_digit_accuracy']:.2%})",
    )
    for label, text in results.get("analysis_summary", []):  # each registered analysis's own rows, verbatim
        table.add_row(label, Text(text))  # as Text: a '[...]' in a row is the run's words, never rich markup
    if "images" in results:
        images = results["images"]
        figures = ", ".join(Path(path).name for name, path in images.items() if name != "attention")
        table.add_row("images", f"{results['run_dir']}/attention/" + (f", {figures}" if figures else ""))
    if "phases" in results:  # where the seconds went
        phases = results["phases"]
        table.add_row(
            "seconds",
            ", ".join(f"{name} {s:.1f}" for name, s in phases.items() if name != "total") + f" = {phases['total']:.1f}",
        )
    table.add_row("run directory", results["run_dir"])
    console.print(table)
    print(
        f"test exact-match {results['test_exact_match']:.4%} on {results['n_test']} held-out problems, "
        f"{results['steps']} steps in {results['train_seconds']:.1f}s"
    )
    print(f"run directory: {results['run_dir']}")
