"""The course's core stays small and plain: the lesson (the files docs/course.md lists in reading order, but
train.py, and every project module they import) within its budget, the files a learner only glances at within
theirs, train.py at most 100 lines, the README at most 250; where the answer sits and a head's name are spelled
once; no private attribute of another library without the one comment that says why no public API does it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

# The lesson's closure today; the aim is 1,000 (what nanoGPT's model and training script take). Lower it as it falls.
CLOSURE_BUDGET, GLANCE_BUDGET, TRAIN_BUDGET, README_BUDGET = 995, 200, 100, 250
# named, counted apart: plumbing a learner glances at, not reads -- the hook points, the character vocabulary,
# the settings' whole-number check
GLANCE = ("model/hooks.py", "data/tokenizer.py", "data/checks.py")
# what the lesson never imports: the run's storage, the analyses, and the research beside the lesson
NOT_THE_LESSON = ("storage/", "analysis/", "model/positions.py", "data/positions.py", "training/optim.py",
                  "model/checkpoint.py", "model/calculator.py", "data/build.py", "data/working.py",
                  "data/operands.py", "data/mixing.py", "data/difficulty.py", "data/text.py",
                  "data/epochs.py", "data/seeds.py")  # fmt: skip


def lines(path) -> int:
    return len((ROOT / path).read_text().splitlines())


def learners_path() -> list[str]:
    """The files docs/course.md's "The path through one run" lists, in its order."""
    text = (ROOT / "docs" / "course.md").read_text()
    section = text.split("## The path through one run", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `([\w/]+\.py)`", section, flags=re.M)


def code_files():
    """The project's own Python, tests and docs' generators excepted (and every virtual environment: .venv,
    .ci/other-python's .venv-3.12, ...)."""
    venvs = {p.parent.name for p in ROOT.glob("*/pyvenv.cfg")}
    skip = {"tests", "runs", "multirun", "outputs", "notebooks", "docs", *venvs}
    return [p for p in sorted(ROOT.rglob("*.py")) if not skip & set(p.relative_to(ROOT).parts)]


def imported(root: Path, rel: str) -> set[str]:
    """The project files ``rel`` imports, at module level or inside functions (and their packages' __init__)."""
    package = Path(rel).parent.parts
    found = set()
    for node in ast.walk(ast.parse((root / rel).read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], node.module or ""]).strip(".")
            base = base if node.level else node.module or ""
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        for name in names:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                for candidate in ("/".join(parts[:i]) + ".py", "/".join(parts[:i]) + "/__init__.py"):
                    if (root / candidate).is_file():
                        found.add(candidate)
    return found


def closure(root: Path, files: list[str]) -> set[str]:
    """``files`` and every project file they import, transitively."""
    seen, todo = set(), list(files)
    while todo:
        rel = todo.pop()
        if rel not in seen:
            seen.add(rel)
            todo += imported(root, rel) - seen
    return seen


def lesson(root: Path = ROOT) -> tuple[set[str], set[str]]:
    """(the lesson's closure: the listed files but train.py, whose imports are the run's machinery, and what they
    import; the glance files among them)."""
    found = closure(root, [p for p in learners_path() if p != "train.py"])
    return found - set(GLANCE), found & set(GLANCE)


def test_the_learners_path_is_listed_and_its_closure_fits_the_budget():
    path = learners_path()
    assert path[:2] == ["model/attention.py", "model/transformer.py"] and path[-1] == "train.py", path
    assert all((ROOT / p).is_file() for p in path), path
    read, glanced = lesson()
    counted = {p: lines(p) for p in sorted(read)}
    assert sum(counted.values()) <= CLOSURE_BUDGET, counted
    assert sum(lines(p) for p in glanced) <= GLANCE_BUDGET, glanced


def test_the_lesson_imports_no_storage_analysis_or_research_module():
    read, _ = lesson()
    assert not [p for p in read if p.startswith(NOT_THE_LESSON)], sorted(read)


def test_the_closure_sees_an_import_inside_a_function_and_follows_it(tmp_path):
    """Mutation check: a scratch repository whose lesson file imports, inside a function, a module that imports
    another: both are counted; without the import, neither."""
    for rel, text in {
        "model/__init__.py": "",
        "model/lesson.py": "def f():\n    from model.far import g\n",
        "model/far.py": "from . import farther\n",
        "model/farther.py": "x = 1\n",
    }.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert closure(tmp_path, ["model/lesson.py"]) >= {"model/far.py", "model/farther.py", "model/__init__.py"}
    (tmp_path / "model/lesson.py").write_text("def f():\n    return 1\n")
    assert closure(tmp_path, ["model/lesson.py"]) == {"model/lesson.py"}


def test_train_py_and_the_readme_fit_their_budgets():
    assert lines("train.py") <= TRAIN_BUDGET
    assert lines("README.md") <= README_BUDGET


HEAD_LABEL = re.compile(r"""f["']L\{[^}]+\}h\{""")


def test_head_labels_are_spelled_once():
    """A head's name is model.hooks.head_label (where the answer sits: test_the_prompt_and_the_answer_...)."""
    labels = []
    for path in code_files():
        text, rel = path.read_text(), str(path.relative_to(ROOT))
        if rel != "model/hooks.py":
            labels += [f"{rel}: {m.group(0)}" for m in HEAD_LABEL.finditer(text)]
    assert labels == []


def test_the_spelling_checks_see_a_second_spelling():
    assert HEAD_LABEL.search('label = f"L{layer}h{head}"')


# other libraries' private names the project once reached for; each needs its reason beside it if it comes back
PRIVATE = re.compile(
    r"threading\._shutdown|atexit\._run_exitfuncs|\bos\._exit\(|\._get_node\(|\._wandb_init|\._checkpoint_connector"
    r"|\._forward_hooks|\._optimizer_step_(pre|post)_hooks|def _save_checkpoint\("
)


def test_no_private_attribute_of_another_library_without_its_reason():
    unexplained = []
    for path in code_files():
        rows = path.read_text().splitlines()
        for i, row in enumerate(rows):
            if PRIVATE.search(row):
                context = " ".join(rows[max(0, i - 3) : i + 1]).lower()
                if "no public" not in context:
                    unexplained.append(f"{path.relative_to(ROOT)}:{i + 1}: {row.strip()}")
    assert unexplained == []


WINDOW_NAMES = {"prompt_len", "answer_len"}
# slices bounded by those lengths that are not the answer window or the prompt: each a layout's own positions
WINDOW_ELSEWHERE = {
    "data/positions.py": "every position's place, read off the layout",
    "analysis/pipeline.py": "the answer's places, read off the layout, for the report",
    "training/results.py": "the operands' text between [BOS] and '=', for the mistakes file",
    "model/export.py": "what Hugging Face's generate returns after the prompt",
    "benchmarks/train_speed.py": "the reference loss, written apart to check the module's against",
}


def window_slices(path: Path) -> list[str]:
    """``x[... prompt_len ...]`` or ``x[... answer_len ...]``: a slice with a bound naming either length."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Subscript):
            continue
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for part in parts:
            bounds = [b for b in (part.lower, part.upper) if b is not None] if isinstance(part, ast.Slice) else []
            names = {n.attr if isinstance(n, ast.Attribute) else n.id for b in bounds for n in ast.walk(b)
                     if isinstance(n, (ast.Attribute, ast.Name))}  # fmt: skip
            if names & WINDOW_NAMES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_the_prompt_and_the_answer_are_sliced_in_one_place():
    """Where the prompt and the answer sit is ProblemFormat's (prompt_of, answer_of, forced_answers,
    exact_match: data/problems.py); a slice bounded by prompt_len or answer_len anywhere else (docs' code too)
    is a second spelling, unless WINDOW_ELSEWHERE says what else it reads."""
    files = code_files() + sorted((ROOT / "docs").rglob("*.py"))
    allowed = {"data/problems.py", *WINDOW_ELSEWHERE}
    assert [s for f in files if str(f.relative_to(ROOT)) not in allowed for s in window_slices(f)] == []


def test_the_window_check_sees_a_second_spelling(tmp_path, monkeypatch):
    """Mutation check: the spellings the check exists for are found, in a scratch file under ROOT's place."""
    import tests.test_course_core as me

    monkeypatch.setattr(me, "ROOT", tmp_path)
    for text in (
        "p = seq[:, : fmt.prompt_len]",
        "a = logits[:, :self.fmt.answer_len].argmax(-1)",
        "x = s[P : fmt.prompt_len + 1]",
    ):
        (tmp_path / "m.py").write_text(text + "\n")
        assert me.window_slices(tmp_path / "m.py") == ["m.py:1"], text
    (tmp_path / "m.py").write_text("p = fmt.prompt_of(seq)\n")
    assert me.window_slices(tmp_path / "m.py") == []


def inheritance_breaches(root: Path) -> list[str]:
    """Classes of model/ and data/ with more than one base or a base defined in the project (a mixin): the lesson's
    classes hold their research pieces as members (composition), they do not inherit them."""
    files = [*root.glob("model/*.py"), *root.glob("data/*.py")]
    trees = {p: ast.parse(p.read_text()) for p in files}
    ours = {n.name for tree in trees.values() for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    found = []
    for path, tree in trees.items():
        for node in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
            if len(bases) > 1 or set(bases) & ours:
                found.append(f"{path.relative_to(root)}: class {node.name}({', '.join(bases)})")
    return found


def test_no_mixins_or_multiple_inheritance_in_model_and_data():
    assert inheritance_breaches(ROOT) == []


def test_the_inheritance_check_sees_a_mixin_and_two_bases(tmp_path):
    """Mutation check: a scratch tree with a mixin and a class of two bases is caught; without them, nothing."""
    (tmp_path / "data").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "data/a.py").write_text("class Working:\n    pass\n\nclass Format(Working):\n    pass\n")
    (tmp_path / "model/b.py").write_text("import torch\n\nclass Net(torch.nn.Module, dict):\n    pass\n")
    assert len(inheritance_breaches(tmp_path)) == 2
    (tmp_path / "data/a.py").write_text("class Working:\n    pass\n\nclass Format:\n    working = None\n")
    (tmp_path / "model/b.py").write_text("import torch\n\nclass Net(torch.nn.Module):\n    pass\n")
    assert inheritance_breaches(tmp_path) == []
