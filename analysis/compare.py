"""``experiment=why_multi_head``: one head of 64 dims against four of 16, same parameters, task and seed.

When the two-run multirun ends, this writes why_multi_head.png (learning curves and final attention maps
side by side) and why_multi_head.md, and prints a short verdict: which learned faster, which heads
specialised.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from analysis.sweep import job_dirs, read_job


def _label(row: dict) -> str:
    return f"{row['n_heads']} head{'s' if row['n_heads'] != 1 else ''} x {row['head_dim']} dims"


def _reached(row: dict) -> str:
    return (
        f"reached 99% val exact-match at step {row['steps_to_99']}"
        if row["steps_to_99"] is not None
        else "never reached 99% val exact-match"
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
        lines.append(f"Faster: {_label(reached[0])}, the only one to reach 99%.")
    else:
        lines.append("Neither learned faster on this seed: compare more seeds (seed=0,1,2).")
    many = max(zip(rows, roles, strict=True), key=lambda pair: pair[0]["n_heads"])
    examples = "; ".join(f"{head}: {role}" for head, role in list(many[1].items())[:4])
    lines.append(f"Specialisation in the {_label(many[0])} model: {examples}.")
    return lines


def compare(sweep_dir: Path) -> list[str]:
    from analysis.plots import head_count_comparison

    rows, roles, runs = [], [], []
    for job in job_dirs(sweep_dir):
        row = read_job(job)
        if row["status"] != "ok":
            continue
        results = json.loads((job / "results.json").read_text())
        maps = json.loads((job / "attention" / "final.json").read_text())
        rows.append(row)
        roles.append(results.get("head_roles", {}))
        runs.append(
            {
                "label": _label(row),
                "history": row["history"],
                "probe": maps["probes"][0],
                "weights": np.array([layer[0] for layer in maps["weights"]]),
            }
        )  # probe 0: (layers, heads, T, T)
    if len(rows) != 2:
        return [f"why_multi_head needs two finished runs; found {len(rows)} (see sweep_summary.md)"]
    head_count_comparison(runs, sweep_dir / "why_multi_head.png")
    lines = verdict(rows, roles)
    (sweep_dir / "why_multi_head.md").write_text(
        "# Why multiple heads: one run each, same parameters, task and seed\n\n"
        + "\n".join(f"- {line}" for line in lines)
        + "\n\n![comparison](why_multi_head.png)\n"
    )
    return lines


class HeadCountComparison(Callback):
    """Hydra callback for experiment=why_multi_head."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        print("why multiple heads?")
        for line in compare(sweep_dir):
            print(f"  {line}")
        print(f"  figure: {sweep_dir / 'why_multi_head.png'}")
