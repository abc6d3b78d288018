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


def module_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """Every project module (package.module) -> the project modules it imports, inside functions too."""
    modules = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for layer in LAYERS
        for p in (root / layer).rglob("*.py")
    }
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found |= {t for t in targets if t in modules and t != name}
        graph[name] = found
    return graph


def test_no_module_imports_itself_through_others():
    graph, cycles = module_imports(), []

    def visit(module: str, path: list[str]) -> None:
        for target in graph[module]:
            if target in path:
                cycles.append(" -> ".join(path[path.index(target) :] + [target]))
            elif target not in done:
                visit(target, path + [target])
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert cycles == []
