"""The end-of-run summary in the terminal: a rich table of what was learned and what the heads do."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

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
    for i, head in enumerate(results.get("most_important_heads", [])):
        table.add_row(
            "most important heads" if i == 0 else "",
            f"L{head['layer']}h{head['head']}: {head['delta_exact_match']:+.1%} when zeroed — {head['role']}",
        )
    if "prunable_fraction" in results:
        table.add_row("prunable", f"{results['prunable_fraction']:.0%} of heads removable losing ≤ 1 point")
    if "images" in results:
        table.add_row("images", f"{results['run_dir']}/attention/, ablation.png, pruning.png")
    table.add_row("run directory", results["run_dir"])
    console.print(table)
    print(
        f"test exact-match {results['test_exact_match']:.4%} on {results['n_test']} held-out problems, "
        f"{results['steps']} steps in {results['train_seconds']:.1f}s"
    )
    print(f"run directory: {results['run_dir']}")
