"""The lessons as notebooks (notebooks/*.ipynb): they are committed clean, they run top to bottom with their
exercises' asserts passing, and docs/course.md's pointers into them name real cells.

Executing needs the notebooks extra (pip install -e ".[notebooks]"). Without it the execution tests are
skipped, unless TINYCALC_REQUIRE_NOTEBOOKS=1 (CI sets it), which makes a missing extra a failure.
Set TINYCALC_NOTEBOOKS_OUT=<dir> to keep the executed copies, outputs and figures included.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
COURSE_MD = ROOT / "docs" / "course.md"

LESSONS = ["01_attention_block", "02_train_and_look", "03_why_several_heads", "04_grouped_query"]
TRAINS = {"02_train_and_look", "03_why_several_heads", "04_grouped_query"}  # minutes of training: slow suite
CELL_REF = re.compile(r"notebooks/(\w+)\.ipynb#([\w-]+)")


def read(stem: str) -> dict:
    return json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text())


def source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def exercise_cells(nb: dict) -> list[dict]:
    """The code cells after the notebook's "Exercises" heading."""
    ids = [c["id"] for c in nb["cells"]]
    return [c for c in nb["cells"][ids.index("exercises") :] if c["cell_type"] == "code"]


def require(module: str):
    if os.environ.get("TINYCALC_REQUIRE_NOTEBOOKS") == "1":
        return importlib.import_module(module)
    return pytest.importorskip(module, reason='the notebooks extra: pip install -e ".[notebooks]"')


# ---- committed clean ------------------------------------------------------------------------------------


PROJECT_PACKAGES = {"model", "data", "analysis", "training"}


@pytest.mark.parametrize("stem", LESSONS)
def test_notebook_code_is_python_that_uses_the_projects_real_code(stem):
    """docs/course.md: the notebooks "import the code named above rather than re-implement it". Every code cell
    parses, the notebook imports from the project's packages, and every name it imports from them, and every
    ``lessons.<name>`` it uses, exists there."""
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == LESSONS  # none is left out of these tests
    lessons = importlib.import_module("notebooks.lessons")
    imported = []
    for cell in read(stem)["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse(source(cell), filename=f"{stem}#{cell['id']}")  # a SyntaxError fails the test here
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module.split(".")[0] in PROJECT_PACKAGES:
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{stem}#{cell['id']}: {node.module} has no {alias.name}"
                    imported.append(f"{node.module}.{alias.name}")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "lessons":
                assert hasattr(lessons, node.attr), f"{stem}#{cell['id']}: notebooks/lessons.py has no {node.attr}"
    assert imported, f"{stem} imports nothing from {sorted(PROJECT_PACKAGES)}"


def test_the_attention_block_notebook_runs_and_its_exercises_are_right(monkeypatch, capsys):
    """Notebook 01 (no training) run in this process, cell by cell from its folder, without the notebooks
    extra: no cell raises, every exercise's assert passes and it prints "right", and the cells docs/course.md
    cites for a fact print that fact, measured on our MultiHeadAttention."""
    monkeypatch.chdir(NOTEBOOKS)
    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    namespace = {"__name__": "__main__"}
    printed = {}
    with torch.random.fork_rng(), torch.enable_grad():  # the notebook turns autograd off: not for the next test
        for cell in read("01_attention_block")["cells"]:
            if cell["cell_type"] == "code":
                exec(compile(source(cell), f"01_attention_block#{cell['id']}", "exec"), namespace)
                printed[cell["id"]] = capsys.readouterr().out
    for cell in exercise_cells(read("01_attention_block")):
        assert printed[cell["id"]].startswith("right"), (cell["id"], printed[cell["id"]])
    assert "our calculator: d_model=64, n_heads=4, head_dim=16" in printed["calculator-row-1"]
    assert "same shape: True   same numbers: False" in printed["wrong-view-1"]  # the view without the transpose
    assert "head 0 and head 1 differ: True" in printed["softmax-1"]
    assert re.search(r"\[1\.0, 1\.0, 1\.0, 1\.0\]", printed["w-o-1"])  # every head reaches every feature
    counts = re.findall(r"^\s+(\d+)\s+(\d+)\s+([\d,]+)\s", printed["cost-1"], re.M)  # heads, head_dim, params
    assert [int(h) for h, _, _ in counts] == [1, 2, 4, 8, 16] and {p for _, _, p in counts} == {"16,640"}


@pytest.mark.parametrize("stem", LESSONS)
def test_notebook_is_committed_without_outputs(stem):
    """Outputs are not committed: CI renders them by running every notebook (see README, "Notebooks")."""
    nb = read(stem)
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5)  # cells carry ids, which docs/course.md points at
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    ids = [c["id"] for c in nb["cells"]]
    assert len(ids) == len(set(ids)), "cell ids must be unique"
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, (
                f"{stem}: cell {cell['id']} carries outputs; clear them before committing"
            )
    assert source(nb["cells"][0]).startswith(f"# {stem[:2]} · "), "the first cell is the lesson's title"
    assert "import lessons" in source(nb["cells"][1]), "the second cell sets up the import path"


@pytest.mark.parametrize("stem", LESSONS)
def test_every_notebook_ends_with_exercises_checked_by_asserts(stem):
    exercises = exercise_cells(read(stem))
    assert len(exercises) >= 3
    for cell in exercises:
        text = source(cell)
        assert re.search(r"^answer_\w* = ", text, re.M), f"{cell['id']}: no answer for the learner to change"
        assert "assert " in text and 'print("right' in text, f"{cell['id']}: the answer is not checked"


# ---- they run -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", [pytest.param(s, marks=pytest.mark.slow) if s in TRAINS else s for s in LESSONS])
def test_notebook_runs_top_to_bottom(stem):
    """Execute the notebook in a fresh kernel, from the notebooks folder as Jupyter would; any failing cell
    (an exercise's assert included) fails the test with the cell and its traceback."""
    nbformat, nbclient = require("nbformat"), require("nbclient")
    require("ipykernel")
    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    started = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - started
    print(f"{stem}: {seconds:.1f} s")  # shown with pytest -s; the README's timing came from these lines

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))  # every cell ran, in order
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    for cell in exercise_cells(nb):
        printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        assert "right" in printed, f"{stem}: exercise cell {cell.id} did not confirm its answer"
    if stem != "01_attention_block":  # the others draw figures inline
        assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), stem

    if out := os.environ.get("TINYCALC_NOTEBOOKS_OUT"):
        Path(out).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, Path(out) / f"{stem}.ipynb")


# ---- docs/course.md points at real cells ---------------------------------------------------------------


def sections(text: str) -> dict[str, str]:
    """'## Heading' -> the section's text, up to the next '## ' heading."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def table_rows(section: str) -> dict[str, str]:
    """A markdown table's rows as {first cell: the rest of the row}, header and rule left out."""
    rows = [line for line in section.splitlines() if line.startswith("|")]
    out = {}
    for line in rows[2:]:
        first, rest = line.strip("|").split("|", 1)
        out[first.strip()] = rest
    return out


def test_course_md_references_into_notebooks_name_real_cells():
    refs = CELL_REF.findall(COURSE_MD.read_text())
    assert len(refs) >= 20, refs
    for stem, cell_id in refs:
        assert stem in LESSONS, f"docs/course.md: no notebook notebooks/{stem}.ipynb"
        cells = read(stem)["cells"]
        ids = [c["id"] for c in cells]
        assert cell_id in ids, f"docs/course.md: notebooks/{stem}.ipynb has no cell {cell_id!r}"
        # the place shows something running: the cell is code, or a heading whose next cell is code
        i = ids.index(cell_id)
        assert "code" in {c["cell_type"] for c in cells[i : i + 2]}, f"{stem}#{cell_id} leads to no code"


def test_every_lesson_idea_and_exercise_has_a_notebook_location():
    """Every row of the page's map of ideas and of its exercise table appears in "In the notebooks", with at
    least one cell reference. A new idea added to the map without a notebook location fails here."""
    page = sections(COURSE_MD.read_text())
    for heading in ("The map", "The exercises and the quiz, as tests", "In the notebooks"):
        assert heading in page, f"docs/course.md has no section '## {heading}'; update this test with it"
    ideas = list(table_rows(page["The map"]))
    exercises = list(table_rows(page["The exercises and the quiz, as tests"]))
    assert len(ideas) >= 10 and len(exercises) >= 10
    located = table_rows(page["In the notebooks"])
    for name in ideas + exercises:
        assert name in located, f"docs/course.md, In the notebooks: no row for {name!r}"
        assert CELL_REF.search(located[name]), f"docs/course.md, In the notebooks: {name!r} names no cell"
    # and every notebook is pointed at from the page
    assert {stem for stem, _ in CELL_REF.findall(page["In the notebooks"])} == set(LESSONS)
