"""``python analyse.py`` on the default run: its circuits per digit, the roles they give, attribution against exact
patching. ``circuits_of``, ``circuit_table`` and ``circuit_roles`` serve circuits_tasks.py too."""

from __future__ import annotations

from pathlib import Path

from .common import ROOT, RUN, image, not_measured, pct, results, run, secs
from .default import default_run

COMMAND = f"python analyse.py {RUN}"
COST = "~30 s (+1 min without the default section)"
DRAWS = {"circuit.png": ["analysis/plots.py", "analysis/metrics/circuit.py"]}


def circuits_of(scratch: Path, run_dir: Path) -> dict:
    """python analyse.py RUN: the run's circuits per digit, the roles they give, attribution against exact patching,
    and the seconds of its analysis and of the whole analyse.py command (``analyse_seconds``), with its peak memory."""
    ran = run([str(ROOT / "analyse.py"), str(run_dir)], scratch)
    r = results(run_dir)
    keep = ("circuits", "circuit_roles", "attribution_correlation_heads", "attribution_correlation_edges")
    keep += ("n_heads", "analysis_seconds")
    return {key: r[key] for key in keep} | {"analyse_seconds": ran.seconds, "analyse_peak_gb": ran.peak_gb}


def measure(scratch: Path) -> dict:
    """python analyse.py on the default run: its circuits per digit, the roles they give, attribution vs exact."""
    run_dir = default_run(scratch)
    found = circuits_of(scratch, run_dir)
    r = results(run_dir)
    images: dict[str, str] = {}
    image(images, run_dir / "circuit.png", "circuit.png", DRAWS["circuit.png"])
    return {
        "command": COMMAND,
        "run": {"steps": r["steps"], "test_exact_match": r["test_exact_match"], "seed": 0},
        **found,
        "images": images,
    }


def circuit_table(circuits: dict) -> list[str]:
    lines = [
        "| digit | circuit edges | of all edges | head → head edges | recovers | random sets of that size |",
        "|---|---|---|---|---|---|",
    ]
    for digit, x in circuits.items():
        lines.append(
            f"| {digit} | {x['edges']} | {x['fraction']:.0%} | {x['head_to_head']} of {x['head_to_head_total']} | "
            f"{x['faithfulness']:.0%} | {pct(x['random_mean'], 1).replace('-0.0%', '0.0%')} ± {x['random_std']:.1%} |"
        )
    return lines


def circuit_roles(c: dict) -> str:
    return "; ".join(f"{head} *{role}*" for head, role in c["circuit_roles"].items() if role)


def block_circuits(m: dict) -> str:
    c = m.get("circuits")
    if not c:
        return not_measured("circuits")
    lines = [
        f"The default run (seed 0, {c['run']['steps']:,} steps, {pct(c['run']['test_exact_match'])}), "
        f"`{c['command']}`:",
        "",
        *circuit_table(c["circuits"]),
        "",
        f"Attribution patching (integrated gradients, 8 steps) against exact patching, Pearson r: heads "
        f"{c['attribution_correlation_heads']:.2f}, edges {c['attribution_correlation_edges']:.2f}. "
        f"Roles from the circuits: {circuit_roles(c)}; the other heads are in no circuit. The whole analysis took "
        f"{c['analysis_seconds']:.0f} s ({secs(c['analyse_seconds'])} for the command"
        + (f", at most {c['analyse_peak_gb']:.2f} GB of memory)." if "analyse_peak_gb" in c else ")."),
    ]
    return "\n".join(lines)


BLOCKS = {"circuits": block_circuits}
