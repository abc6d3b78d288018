"""How many mistakes tests/test_bad_configs.py holds (the Configuration page's count; nothing trained)."""

from __future__ import annotations

import ast
from pathlib import Path

from .common import ROOT

COMMAND = "How many mistakes tests/test_bad_configs.py holds (read from the test, nothing trained)."
COST = "instant"


def measure(scratch: Path) -> dict:
    """How many mistakes tests/test_bad_configs.py holds (read from the test, nothing trained)."""
    tree = ast.parse((ROOT / "tests/test_bad_configs.py").read_text())
    found = {
        target.id: len(node.value.elts)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    tables = ("BAD_CONFIGS", "REACHES_LIGHTNING_OR_WANDB", "ABSENT_DEVICES")
    return {"cases": sum(found.get(table, 0) for table in tables)}


def block_bad_configs(m: dict) -> str:
    b = m.get("bad_configs")
    return "(not counted yet)" if not b else f"{b['cases']}"


BLOCKS = {"bad_configs": block_bad_configs}
