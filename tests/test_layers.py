"""Layers import downward only: storage <- data <- model <- training <- analysis <- benchmarks <- the commands."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["storage", "data", "model", "training", "analysis", "benchmarks"]  # each may import those before it


def imports(path: Path) -> set[str]:
    """The top-level names a file imports (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def upward_imports(root: Path = ROOT) -> list[str]:
    """Each import of a layer above the file's own, or of a command: "<file> imports <name>"."""
    commands = {p.stem for p in root.glob("*.py")}
    wrong = []
    for rank, layer in enumerate(LAYERS):
        for path in sorted((root / layer).rglob("*.py")):
            for name in imports(path):
                if name in commands or (name in LAYERS and LAYERS.index(name) > rank):
                    wrong.append(f"{path.relative_to(root)} imports {name}")
    return wrong


def test_every_package_imports_only_its_own_layer_or_those_below():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from analysis.sweep import summarise\n    import train\n")
    assert {"analysis", "train"} <= imports(bad)


def scratch_copy(tmp_path: Path) -> Path:
    """The layers' modules and the commands, copied: a tree to break."""
    for layer in LAYERS:
        shutil.copytree(ROOT / layer, tmp_path / layer, ignore=shutil.ignore_patterns("__pycache__", "*.js", "*.html"))
    for command in ROOT.glob("*.py"):
        shutil.copy(command, tmp_path)
    return tmp_path


def test_the_layer_check_fails_on_a_tree_that_breaks_the_rule(tmp_path):
    """The guard can fail: storage/rundir.py importing training (inside a function) and data/problems.py importing
    the train command, in a scratch copy of the tree, are both reported."""
    root = scratch_copy(tmp_path)
    with (root / "storage" / "rundir.py").open("a") as f:
        f.write("\n\ndef upward():\n    from training.config import build\n\n    return build\n")
    with (root / "data" / "problems.py").open("a") as f:
        f.write("\nimport train  # noqa\n")
    assert upward_imports(root) == ["storage/rundir.py imports training", "data/problems.py imports train"]


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


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each cycle of the import graph, as "a -> b -> a"."""
    cycles: list[str] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(graph[module]):
            if target in path:
                cycles.append(" -> ".join(path[path.index(target) :] + [target]))
            elif target not in done:
                visit(target, path + [target])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    return cycles


def test_no_module_imports_itself_through_others():
    assert import_cycles(module_imports()) == []


def test_the_cycle_check_fails_on_a_tree_with_a_cycle(tmp_path):
    """The guard can fail: in a scratch copy, a module that another imports imports it back (inside a function,
    where a cycle does not break the import) and the cycle is reported."""
    root, graph = scratch_copy(tmp_path), module_imports()
    importer, imported = next((a, b) for a in sorted(graph) for b in sorted(graph[a]))  # an edge of the graph
    path = root / Path(*imported.split(".")).with_suffix(".py")
    if not path.is_file():  # a package: its __init__.py
        path = path.with_suffix("") / "__init__.py"
    with path.open("a") as f:
        f.write(f"\n\ndef back():\n    import {importer}\n\n    return {importer}\n")
    assert [set(cycle.split(" -> ")) for cycle in import_cycles(module_imports(root))] == [{importer, imported}]
