"""The course's core stays small and plain: the learner's path (docs/course.md lists it in reading order) is at most
1,000 lines, train.py at most 100, the README at most 250; where the answer sits and a head's name are spelled once;
no private attribute of another library without the one comment that says why no public API does it."""

from __future__ import annotations

import re

from tests.conftest import ROOT

PATH_BUDGET, TRAIN_BUDGET, README_BUDGET = 1000, 100, 250


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


def test_the_learners_path_is_listed_and_fits_the_budget():
    path = learners_path()
    assert path[:2] == ["model/attention.py", "model/transformer.py"] and path[-1] == "train.py", path
    assert all((ROOT / p).is_file() for p in path), path
    counted = {p: lines(p) for p in path}
    assert sum(counted.values()) <= PATH_BUDGET, counted


def test_train_py_and_the_readme_fit_their_budgets():
    assert lines("train.py") <= TRAIN_BUDGET
    assert lines("README.md") <= README_BUDGET


def test_the_counts_see_a_longer_file(tmp_path, monkeypatch):
    """The budget check counts every line: a file padded past the budget fails it."""
    import tests.test_course_core as me

    monkeypatch.setattr(me, "ROOT", tmp_path)
    (tmp_path / "train.py").write_text("\n" * (TRAIN_BUDGET + 1))
    assert me.lines("train.py") > TRAIN_BUDGET


ANSWER_SLICE = re.compile(r"\[[^\]]*\b(P|prompt_len)\s*:\s*(P|\w+\.prompt_len)?\s*\+\s*(A|[\w.]*answer_len)\b")
HEAD_LABEL = re.compile(r"""f["']L\{[^}]+\}h\{""")


def test_the_answer_window_and_head_labels_are_spelled_once():
    """Where the answer sits is ProblemFormat.answer_of (data/problems.py); a head's name is model.hooks.head_label."""
    slices, labels = [], []
    for path in code_files():
        text, rel = path.read_text(), str(path.relative_to(ROOT))
        if rel != "data/problems.py":
            slices += [f"{rel}: {m.group(0)}" for m in ANSWER_SLICE.finditer(text)]
        if rel != "model/hooks.py":
            labels += [f"{rel}: {m.group(0)}" for m in HEAD_LABEL.finditer(text)]
    assert slices == [] and labels == []


def test_the_spelling_checks_see_a_second_spelling():
    assert ANSWER_SLICE.search("right = seq[:, P : P + A]") and ANSWER_SLICE.search(
        "s[:, fmt.prompt_len : fmt.prompt_len + fmt.answer_len]"
    )
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
