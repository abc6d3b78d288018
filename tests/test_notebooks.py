"""The lessons as notebooks (notebooks/*.ipynb): they are committed clean, they run top to bottom, every
exercise waits for the learner's answer and its worked solution passes the exercise's assert, and
docs/course.md's pointers into them name real cells.

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

LESSONS = ["01_attention_block", "02_train_and_look", "03_why_several_heads", "04_grouped_query", "05_write_your_block"]
TRAINS = {"02_train_and_look", "03_why_several_heads", "04_grouped_query", "05_write_your_block"}  # slow suite
AFTER_EXERCISES = "train-yours"  # notebook 05 trains the block its exercises build, after them
CELL_REF = re.compile(r"notebooks/(\w+)\.ipynb#([\w-]+)")


def read(stem: str) -> dict:
    return json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text())


def source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def exercise_section(nb: dict) -> list[dict]:
    """The cells from the notebook's "Exercises" heading on (up to notebook 05's training with the block they build)."""
    ids = [c["id"] for c in nb["cells"]]
    end = ids.index(AFTER_EXERCISES) if AFTER_EXERCISES in ids else len(ids)
    return nb["cells"][ids.index("exercises") : end]


def is_solution(cell: dict) -> bool:
    """A worked solution: a code cell Jupyter shows collapsed."""
    return cell["cell_type"] == "code" and cell["metadata"].get("jupyter", {}).get("source_hidden") is True


def exercises_and_solutions(nb: dict) -> list[tuple[dict, dict]]:
    """(exercise cell, its worked solution) for every exercise, in order."""
    code = [c for c in exercise_section(nb) if c["cell_type"] == "code"]
    return list(zip(code[::2], code[1::2], strict=True))


def tags(cell: dict) -> list[str]:
    return cell["metadata"].get("tags", [])


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


def run_in_process(stem: str, namespace: dict, capsys, until: str | None = None) -> dict[str, str]:
    """The notebook's code cells run in this process, in ``namespace``, up to the cell ``until`` (else all): each
    cell's output by id. An exercise as it ships must stop with lessons.Unanswered; no other cell may raise."""
    printed = {}
    for cell in read(stem)["cells"]:
        if cell["id"] == until:
            break
        if cell["cell_type"] == "code":
            code = compile(source(cell), f"{stem}#{cell['id']}", "exec")
            if "raises-exception" in tags(cell):
                with pytest.raises(namespace["lessons"].Unanswered):
                    exec(code, namespace)
            else:
                exec(code, namespace)
            printed[cell["id"]] = capsys.readouterr().out
    return printed


def test_the_attention_block_notebook_runs_and_its_exercises_are_right(monkeypatch, capsys):
    """Notebook 01 (no training) run in this process, cell by cell from its folder, without the notebooks
    extra: every exercise, as it ships, stops with lessons.Unanswered; no other cell raises; every worked
    solution's assert passes and it prints "right"; and the cells docs/course.md cites for a fact print that
    fact, measured on our MultiHeadAttention."""
    monkeypatch.chdir(NOTEBOOKS)
    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    nb = read("01_attention_block")
    with torch.random.fork_rng(), torch.enable_grad():  # the notebook turns autograd off: not for the next test
        printed = run_in_process("01_attention_block", {"__name__": "__main__"}, capsys)
    for exercise, solution in exercises_and_solutions(nb):
        assert printed[exercise["id"]] == "", exercise["id"]  # stopped before any check ran
        assert printed[solution["id"]].startswith("right"), (solution["id"], printed[solution["id"]])
    assert "our calculator: d_model=64, n_heads=4, head_dim=16" in printed["calculator-row-1"]
    assert "same shape: True   same numbers: False" in printed["wrong-view-1"]  # the view without the transpose
    assert "head 0 and head 1 differ: True" in printed["softmax-1"]
    assert re.search(r"\[1\.0, 1\.0, 1\.0, 1\.0\]", printed["w-o-1"])  # every head reaches every feature
    counts = re.findall(r"^\s+(\d+)\s+(\d+)\s+([\d,]+)\s", printed["cost-1"], re.M)  # heads, head_dim, params
    assert [int(h) for h, _, _ in counts] == [1, 2, 4, 8, 16] and {p for _, _, p in counts} == {"16,640"}


def test_the_write_your_block_notebook_checks_each_step_and_the_block_with_model_check(monkeypatch, capsys):
    """Notebook 05 without its training cell: every exercise stops for its answer, every worked solution passes
    and prints "right", and the block they assemble passes model/check.py's check line by line."""
    monkeypatch.chdir(NOTEBOOKS)
    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    with torch.random.fork_rng():
        printed = run_in_process("05_write_your_block", {"__name__": "__main__"}, capsys, until=AFTER_EXERCISES)
    for exercise, solution in exercises_and_solutions(read("05_write_your_block")):
        assert printed[exercise["id"]] == "", exercise["id"]
        assert printed[solution["id"]].startswith("right") or "\nright" in printed[solution["id"]], solution["id"]
    assert "your block is the lesson's" in printed["exercise-5-solution-1"]
    assert "FAIL" not in printed["exercise-5-solution-1"] and "FAIL" not in printed["the-check-1"]


def test_a_wrong_step_makes_the_block_cell_fail_with_the_checks_line(monkeypatch, capsys):
    """The learner's merge without the transpose back (shapes still right): exercise 5's cell, the block built
    from the steps, fails its assert with model.check's line naming that mistake and its step."""
    from model.check import MISTAKES

    monkeypatch.chdir(NOTEBOOKS)
    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    namespace = {"__name__": "__main__"}
    with torch.random.fork_rng():
        run_in_process("05_write_your_block", namespace, capsys, until="exercise-5")
        namespace["answer_merge"] = lambda z: z.reshape(z.shape[0], z.shape[2], -1)  # (B, h, T, hd) read as (B, T, d)
        solution = next(c for c in read("05_write_your_block")["cells"] if c["id"] == "exercise-5-solution-1")
        with pytest.raises(AssertionError) as failed:
            exec(compile(source(solution), "05#exercise-5-solution-1", "exec"), namespace)
    assert str(failed.value) == MISTAKES["merge without transpose"][1].format(sqrt_hd=4, sqrt_d=8)
    assert "FAIL heads concatenated without transposing back" in capsys.readouterr().out


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


def answers(cell: dict) -> dict[str, bool]:
    """The cell's top-level answers -> whether each is still blank: ``answer_x = ...``, or a
    ``def answer_x(...)`` whose return value is ``...``."""
    out = {}
    for node in ast.parse(source(cell)).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(target, ast.Name) and target.id.startswith("answer_"):
            out[target.id] = isinstance(node.value, ast.Constant) and node.value.value is ...
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("answer_"):
            returned = [n.value for n in ast.walk(node) if isinstance(n, ast.Return)]
            out[node.name] = all(isinstance(r, ast.Constant) and r.value is ... for r in returned)
    return out


def check_part(cell: dict) -> str:
    """The cell from its ``lessons.answered(...)`` line on: what checks the answers."""
    text = source(cell)
    return text[text.index("lessons.answered(") :]


@pytest.mark.parametrize("stem", LESSONS)
def test_every_notebook_ends_with_blank_exercises_each_followed_by_its_worked_solution(stem):
    """After "Exercises": per exercise a question, the code cell the learner fills in (every answer ``...``,
    tagged raises-exception so that nbclient and nbconvert run past it), a "Solution" heading, and a
    collapsed cell that fills in every answer and runs exactly the exercise's check."""
    nb = read(stem)
    section = exercise_section(nb)[1:]
    assert len(section) % 4 == 0 and len(section) >= 12, [c["id"] for c in section]
    for question, exercise, heading, solution in zip(*[iter(section)] * 4, strict=True):
        name = question["id"]
        assert question["cell_type"] == "markdown" and exercise["id"] == f"{name}-1", name
        assert exercise["cell_type"] == "code" and not is_solution(exercise), name
        assert tags(exercise) == ["raises-exception"], f"{name}: not tagged raises-exception"
        assert heading["cell_type"] == "markdown" and heading["id"] == f"{name}-solution", name
        assert source(heading).startswith("#### Solution"), name
        assert is_solution(solution) and solution["id"] == f"{name}-solution-1" and not tags(solution), name

        blank, worked = answers(exercise), answers(solution)
        assert blank and all(blank.values()), f"{name}: an answer is not left as ... for the learner"
        assert worked.keys() == blank.keys() and not any(worked.values()), f"{name}: the solution misses an answer"
        check = check_part(exercise)
        assert check_part(solution) == check, f"{name}: the solution is checked differently from the exercise"
        called = check.splitlines()[0]
        assert all(answer in called for answer in blank), f"{name}: lessons.answered() misses an answer"
        assert "assert " in check and 'print("right' in check, f"{name}: the answer is not checked"
        assert source(solution).split("\n", 1)[0].startswith("# "), f"{name}: the solution is not worked"


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
    errors = {c.id: [o.ename for o in c.outputs if o.output_type == "error"] for c in code}
    for exercise, solution in exercises_and_solutions(nb):
        assert errors.pop(exercise.id) == ["Unanswered"], f"{stem}: exercise cell {exercise.id} as it ships"
        printed = "".join(o.get("text", "") for o in solution.outputs if o.output_type == "stream")
        assert "right" in printed, f"{stem}: the solution {solution.id} did not confirm its answer"
    assert not {cell: names for cell, names in errors.items() if names}, f"{stem}: a cell failed"
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
    """A section's list as {an entry's first line: its sub-items}: each row of what would be a table, as a
    '- name' line with its cells below it, indented ('  - where it lives: ...')."""
    out: dict[str, str] = {}
    name = None
    for line in section.splitlines():
        if line.startswith("- "):
            name = line.removeprefix("- ").strip()
            out[name] = ""
        elif name is not None and line.startswith("  "):
            out[name] += line + "\n"
        else:
            name = None
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
    least one cell reference, and every notebook exercise is named there with its worked solution. A new idea
    added to the map without a notebook location fails here, and so does a new exercise the page leaves out."""
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
    # and every notebook is pointed at from the page, every exercise with its worked solution
    named = set(CELL_REF.findall(page["In the notebooks"]))
    assert {stem for stem, _ in named} == set(LESSONS)
    for stem in LESSONS:
        for exercise, solution in exercises_and_solutions(read(stem)):
            heading = solution["id"].removesuffix("-1")
            assert {(stem, exercise["id"].removesuffix("-1")), (stem, heading)} <= named, f"{stem}: {heading}"
