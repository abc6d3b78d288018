"""``experiment=why_multi_head``: one head of 64 dims against four of 16, same parameters, task and seed.

When the two-run multirun ends, this writes why_multi_head.png (learning curves and final attention maps
side by side) and why_multi_head.md, and prints a short verdict: which learned faster, which heads
specialised.
"""

from __future__ import annotations

import numpy as np

from analysis.record import save_figure
from analysis.sweep import read_job
from data.problems import MASTERED
from storage.rundir import RunDir, RunFileError, SweepDir

TARGET = f"{MASTERED:.0%}"


def _label(row: dict) -> str:
    return f"{row['n_heads']} head{'s' if row['n_heads'] != 1 else ''} x {row['head_dim']} dims"


def _reached(row: dict) -> str:
    return (
        f"reached {TARGET} val exact-match at step {row['steps_to_99']}"
        if row["steps_to_99"] is not None
        else f"never reached {TARGET} val exact-match"
    )


def verdict(rows: list[dict], roles: list[dict[str, str]]) -> list[str]:
    """Plain sentences comparing the runs (rows from read_job, roles from each run's results.json)."""
    lines = []
    for row, run_roles in zip(rows, roles, strict=True):
        distinct = sorted(set(run_roles.values()))
        lines.append(
            f"{_label(row)}: {_reached(row)}; test exact-match "
            f"{row['test_exact_match']:.2%}; {len(distinct)} distinct role(s) among its "
            f"{len(run_roles)} heads."
        )
    reached = [r for r in rows if r["steps_to_99"] is not None]
    if len(reached) == 2 and reached[0]["steps_to_99"] != reached[1]["steps_to_99"]:
        fast, slow = sorted(reached, key=lambda r: r["steps_to_99"])
        lines.append(f"Faster: {_label(fast)} ({fast['steps_to_99']} steps against {slow['steps_to_99']}).")
    elif len(reached) == 1:
        lines.append(f"Faster: {_label(reached[0])}, the only one to reach {TARGET}.")
    else:
        lines.append("Neither learned faster on this seed: compare more seeds (seed=0,1,2).")
    many = max(zip(rows, roles, strict=True), key=lambda pair: pair[0]["n_heads"])
    examples = "; ".join(f"{head}: {role}" for head, role in list(many[1].items())[:4])
    lines.append(f"Specialisation in the {_label(many[0])} model: {examples}.")
    return lines


def final_maps(job: RunDir) -> dict | str:
    """A finished job's final attention maps of its first probe ({"probe", "weights": (layers, heads, T, T)}),
    read through the run directory's bounded reader; or why they cannot be drawn (one line)."""
    path = job.attention_data("final")
    try:
        maps = job.read_json(path)
        if maps is None:
            return f"{path}: not recorded"
        return {"probe": str(maps["probes"][0]), "weights": np.array([layer[0] for layer in maps["weights"]], float)}
    except RunFileError as e:
        return str(e)
    except (KeyError, IndexError, TypeError, ValueError) as e:  # readable JSON, but not maps a run writes
        return f"{path}: not the attention maps a run writes ({type(e).__name__}: {str(e)[:80]})"


def compare(sweep: SweepDir) -> list[str]:
    from analysis.plots import head_count_comparison

    rows, roles, runs = [], [], []
    for job in sweep.jobs():
        row = read_job(job)
        if row["status"] != "ok":
            continue
        results = RunDir(job.path).read_results()
        maps = final_maps(job)
        if isinstance(maps, str):
            return [f"why_multi_head cannot compare: {maps}"]
        rows.append(row)
        roles.append(results.get("head_roles", {}))
        runs.append({"label": _label(row), "history": row["history"], **maps})
    if len(rows) != 2:
        return [f"why_multi_head needs two finished runs; found {len(rows)} (see sweep_summary.md)"]
    save_figure(head_count_comparison(runs), sweep.comparison_figure)
    lines = verdict(rows, roles)
    RunDir.write_text(
        sweep.comparison_md,
        "# Why multiple heads: one run each, same parameters, task and seed\n\n"
        + "\n".join(f"- {line}" for line in lines)
        + f"\n\n![comparison]({sweep.comparison_figure.name})\n",
    )
    return lines
