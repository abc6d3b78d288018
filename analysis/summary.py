"""The end-of-run summary in the terminal, in the course's words: the task, the model, training, the test, and one
line per head saying where it attends and what switching it off costs. It fits a 100-column terminal.

``verbose=true`` prints the researcher's view instead: a table with every registered analysis's rows verbatim
(direct effects, patching, circuits, each head's reconciled story), the same rows results.json, report.html and
wandb hold.
"""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from analysis.metric import points
from analysis.metrics.roles import SPREAD
from data.build import problem_format
from data.operations import name_of
from storage.messages import counted

WIDTH = 100  # the summary's widest line, also when the terminal is wider (and the width assumed when piped)
LABEL = 10  # the labels' column: "training  "
MAX_HEADS = 12  # more heads than this: the costliest ones, then one line for the rest
OPERANDS = {"a and b": "both operands' digits", "a": "the first operand's digit", "b": "the second operand's digit"}
ALIGNED = re.compile(r"answer digit 10\^k reads (a and b|a|b) digit 10\^k([+-]\d+)? \((.*)\)")
LOCAL = {"current token": "its own token", "previous token": "the token before it"}
FIGURES = ("ablation", "pruning")  # the analyses' figures the summary names, beside the attention maps


def print_summary(results: dict, console: Console | None = None, verbose: bool = False) -> None:
    if verbose:
        researchers_table(results, console)
    else:
        console = console or Console(width=min(shutil.get_terminal_size((WIDTH, 24)).columns, WIDTH))
        for line in summary_lines(results, console.width):
            console.print(Text(line), soft_wrap=True)  # as Text: a '[...]' is the run's words, never rich markup
    print(
        f"test exact-match {results['test_exact_match']:.4%} on {results['n_test']} held-out problems, "
        f"{results['steps']} steps in {results['train_seconds']:.1f}s"
    )
    print(f"run directory: {results['run_dir']}")


def summary_lines(results: dict, width: int = WIDTH) -> list[str]:
    """The learner's summary, one string per line, none wider than ``width`` (a path longer than that aside)."""
    fmt = results["data"]
    operation = " / ".join(name_of(op) for op in fmt["operators"])
    order = "units digit first (reversed)" if fmt["reverse_answer"] else "most significant digit first"
    if fmt["operators"] == "/":  # the pair written as one number (data/division.py)
        order = "remainder then quotient, " + order if fmt["reverse_answer"] else "quotient then remainder, " + order
    work = ", with its working" if problem_format(**fmt).work_len else ""
    d_model = results.get("d_model", results["n_heads"] * results["head_dim"])
    task = f"{fmt['digits']}-digit {operation}"
    if fmt.get("operands", 2) > 2:  # a sum of many operands (data/sums.py)
        task = f"sums of {fmt['operands']} operands of up to {fmt['digits']} digits"
    rows = [
        ("task", f"{task}, answer written {order}{work}"),
        (
            "model",
            f"{counted(results['n_layers'], 'layer')} × {counted(results['n_heads'], 'head')} × "
            f"head_dim {results['head_dim']} "
            f"(d_model {d_model}, {results['n_params']:,} parameters)"
            + (f", your block {results['attention_block']['spec']}" if "attention_block" in results else ""),
        ),
        (
            "training",
            f"{results['steps']:,} steps in {results['train_seconds']:.1f} s "
            f"({results['tokens_per_second']:,} tokens/s)",
        ),
        (
            "test",
            f"{results['test_exact_match']:.2%} right on {results['n_test']:,} problems it never saw "
            f"(each digit: {results['test_digit_accuracy']:.2%})",
        ),
        *head_rows(results),
        *(("not run", f"{name}: {why}") for name, why in results.get("analyses_not_run", {}).items()),
    ]
    if "images" in results:  # the figures of the heads switched off; every figure is in report.html
        figures = "".join(f", {Path(results['images'][name]).name}" for name in FIGURES if name in results["images"])
        rows.append(("images", f"{results['run_dir']}/attention/{figures} (all of them: report.html)"))
    if "phases" in results:  # where the seconds went
        phases = results["phases"]
        seconds = ", ".join(f"{name} {s:.1f}" for name, s in phases.items() if name != "total")
        rows.append(("seconds", f"{seconds} = {phases['total']:.1f}"))
    lines = ["tinycalc run"]
    for label, text in rows:
        wrapped = textwrap.wrap(text, width - LABEL, break_long_words=False, break_on_hyphens=False)
        lines += [f"{label if i == 0 else '':<{LABEL - 2}}  {part}" for i, part in enumerate(wrapped or [""])]
    return lines


def head_rows(results: dict) -> list[tuple[str, str]]:
    """("L0h0", "both operands' digits at the same place; off: 0% right (-100 pts)") per head, after the heads'
    header; then the pruning."""
    if "head_roles" not in results:
        return []  # analysis=none
    if not results.get("learned", True):
        return [("heads", f"not learned yet ({results.get('intact_exact_match', 0.0):.1%} right): no job is claimed")]
    roles, off = results["head_roles"], results.get("head_ablation", {})
    intact = results.get("intact_exact_match", results["test_exact_match"])
    cost = {head: off[head]["zero"] - intact if head in off else 0.0 for head in roles}
    shown = list(roles)
    if len(shown) > MAX_HEADS:  # the costliest, in the model's order
        kept = set(sorted(shown, key=lambda head: cost[head])[: MAX_HEADS - 1])
        shown = [head for head in shown if head in kept]
    rows = [("heads", "what each attends to while the answer is written; the test with it switched off:")]
    wheres = {head: in_course_words(roles[head]) for head in shown}
    offs = {
        head: f"off: {_percent(off[head]['zero'])} right ({_points(cost[head])} pts)" for head in shown if head in off
    }
    room = WIDTH - LABEL - 2 - max(map(len, offs.values()), default=0)  # "; " then what switching it off costs
    column = min(max(map(len, wheres.values())), room)  # the costs in one column
    for head in shown:
        where = wheres[head] if len(wheres[head]) <= room else wheres[head][: room - 1] + "…"
        rows.append((head, f"{where + ';':<{column + 1}} {offs[head]}" if head in offs else where))
    if len(shown) < len(roles):
        rows.append(("", f"the other {len(roles) - len(shown)} heads cost less; report.html shows every head"))
    rows += [("", key) for key in role_keys(" ".join(roles[head] for head in shown))]
    if "prunable_fraction" in results:
        n = len(roles)
        removable = round(results["prunable_fraction"] * n)
        rows.append(
            (
                "pruning",
                f"{removable} of {n} heads can be removed together, losing at most "
                f"{points(results.get('tolerance', 0.01))} of the test",
            )
        )
    return rows


def in_course_words(role: str) -> str:
    """What a head attends to, from its mean pattern (analysis/metrics/roles.py), as the course would say it."""
    if role in LOCAL:
        return LOCAL[role]
    aligned = ALIGNED.fullmatch(role)
    if aligned:
        reads, offset, what = aligned.groups()
        n = int(offset or 0)
        place = "at the same place" if n == 0 else f"{'one' if abs(n) == 1 else abs(n)} place{'s' * (abs(n) > 1)} "
        place += "" if n == 0 else "lower" if n < 0 else "higher"
        why = f" ({what})" if what not in ("the same place", "another place") else ""
        return f"{OPERANDS[reads]} {place}{why}"
    if role.startswith("reads "):
        return "by place: " + role.removeprefix("reads ")
    return role.removeprefix("attends to ")


def role_keys(text: str) -> list[str]:
    """What the symbols in the heads' roles (``text``) mean, a line per kind that occurs (report.html: Roles.intro)."""
    keys = []
    if re.search(r"\b[abr]\d", text):
        keys.append("rK<-aJ+bJ: the answer's digit 10^K attends to both operands' digits 10^J")
    marks = []
    if "~" in text:
        marks.append(f"~ = spread out (no key gets {SPREAD:.0%} of its weight)")
    if re.search(r"(?<!\w)\^", text):  # the start token (r0<-^), not a power of ten (10^k, a·10^1)
        marks.append("^ = the start token ([BOS])")
    return keys + (["; ".join(marks)] if marks else [])


def _percent(x: float) -> str:
    return f"{x:.0%}" if round(100 * x, 1) == round(100 * x) else f"{x:.1%}"


def _points(delta: float) -> str:
    value = round(100 * delta, 1) + 0.0  # no "-0.0"
    if value == 0:
        return "±0"
    return f"{value:+.0f}" if value == round(value) else f"{value:+.1f}"


def researchers_table(results: dict, console: Console | None = None) -> None:
    """The researcher's view (verbose=true): every registered analysis's rows, verbatim, in a table."""
    # piped or redirected, rich would assume 80 columns and wrap (cutting the run directory in two)
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title="tinycalc run", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    fmt = results["data"]
    table.add_row(
        "task",
        f"{fmt['digits']}-digit '{fmt['operators']}', answer {'reversed' if fmt['reverse_answer'] else 'plain'}"
        + (" with working" if problem_format(**fmt).work_len else ""),
    )
    table.add_row(
        "model",
        f"{counted(results['n_layers'], 'layer')} x {counted(results['n_heads'], 'head')} of "
        f"{results['head_dim']} dims "
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
