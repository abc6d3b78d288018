"""Layers import downward only: storage <- data <- model <- training <- analysis <- benchmarks <- the commands."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["storage", "data", "model", "training", "analysis", "benchmarks"]  # each may import those before it
COMMANDS = {p.stem for p in ROOT.glob("*.py")}  # train, calc, bench: nothing imports them


def imports(path: Path) -> set[str]:
    """The top-level names a file imports (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_every_package_imports_only_its_own_layer_or_those_below():
    wrong = []
    for rank, layer in enumerate(LAYERS):
        for path in sorted((ROOT / layer).rglob("*.py")):
            for name in imports(path):
                if name in COMMANDS or (name in LAYERS and LAYERS.index(name) > rank):
                    wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert wrong == []


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from analysis.sweep import summarise\n    import train\n")
    assert {"analysis", "train"} <= imports(bad)
