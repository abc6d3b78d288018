"""``python bench.py phases``: where a whole ``python train.py`` goes, phase by phase, for the default run beside the
previous recipe (and each cut between them: what each bought) and for the 10-digit preset, taking turns."""

from __future__ import annotations

from pathlib import Path

from .common import bench, not_measured

COMMAND = "python bench.py phases --repeat 5"
COST = "~10 min"
PHASES = ("startup", "build", "training", "test", "analysis", "report", "outside")


def measure(scratch: Path) -> dict:
    """python bench.py phases --repeat 5: each run's phases and whole command, taking turns, and each cut's saving."""
    return {"command": COMMAND} | bench(scratch, "phases", "--repeat", "5", ok=(0, 1))["phases"]


def block_phases(m: dict) -> str:
    x = m.get("phases")
    if not x or not x.get("runs"):
        return not_measured("phases")
    lines = ["| run | " + " | ".join(PHASES) + " | whole command | steps |", "|---" * (len(PHASES) + 3) + "|"]
    for name, run in x["runs"].items():
        cells = [f"{run['seconds'][p]:.1f} s ({run['share'][p]:.0%})" for p in PHASES]
        steps = " / ".join(str(s) for s in run["steps"])
        lines.append(f"| {name} | " + " | ".join(cells) + f" | **{run['whole_seconds']:.1f} s** | {steps} |")
    commands = "; ".join(f"{name}: `{run['command']}`" for name, run in x["runs"].items())
    return "\n".join(lines) + f"\n\nMedians of {x['rounds']} rounds, taking turns ({commands})."


def block_phases_cuts(m: dict) -> str:
    x = m.get("phases")
    if not x or not x.get("cuts"):
        return not_measured("phases")
    seconds = lambda s: "—" if s is None else f"{s:.1f} s"  # noqa: E731
    lines = ["| cut | whole command saved | training saved | undone by |", "|---|---|---|---|"]
    for c in x["cuts"]:
        lines.append(
            f"| {c['cut']} | {seconds(c['whole_seconds_saved'])} | {seconds(c['training_seconds_saved'])} "
            f"| `{c['undone_by']}` |"
        )
    return "\n".join(lines)


BLOCKS = {"phases": block_phases, "phases_cuts": block_phases_cuts}
