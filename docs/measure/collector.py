"""``python bench.py collector``: what Python's cycle collector costs over what train.py and analyse.py import, and
what freezing those objects (training/collector.py) saves: one full collection and the interpreter's exit."""

from __future__ import annotations

from pathlib import Path

from .common import bench, not_measured

COMMAND = "python bench.py collector"
COST = "~40 s"


def measure(scratch: Path) -> dict:
    """python bench.py collector: a full collection and the exit over each command's imports, frozen and not."""
    return {"command": COMMAND} | bench(scratch, "collector")["collector"]


def block_collector(m: dict) -> str:
    x = m.get("collector")
    if not x:
        return not_measured("collector")
    lines = [
        "| imports of | objects a full collection scans | a full collection | frozen | the exit | frozen |",
        "|---|---|---|---|---|---|",
    ]
    for row in x["rows"]:
        lines.append(
            f"| `{row['command']}` | {row['scanned']:,} → {row['scanned_frozen']:,} | {row['collect_ms']:.0f} ms "
            f"| {row['collect_ms_frozen']:.0f} ms | {row['exit_ms']:,} ms | {row['exit_ms_frozen']:,} ms |"
        )
    return "\n".join(lines) + f"\n\n`{x['command']}` (medians of {x['repeat']} rounds, each in a fresh interpreter)."


BLOCKS = {"collector": block_collector}
