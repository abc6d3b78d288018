"""The README and docs/ tell the truth by construction: measured blocks equal their rendering from docs/measured/,
every figure they show was drawn by the code as it is, and no sentence narrates how the project was made.

Nothing here trains: docs/regenerate.py measures, this only compares (python docs/regenerate.py --render fixes a
block that disagrees with its JSON; --only SECTION re-measures a section whose figure is stale).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, regenerate_module

REGEN = regenerate_module()
MEASURED = REGEN.load_measured()
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)]+\.png)\)")


@pytest.mark.parametrize("doc", REGEN.DOCS, ids=lambda p: p.name)
def test_every_measured_block_equals_its_rendering_from_docs_measured(doc):
    text = doc.read_text()
    assert REGEN.render(text, MEASURED) == text, (
        f"{doc.relative_to(ROOT)}: a measured block disagrees with docs/measured/*.json; "
        "run  python docs/regenerate.py --render  (or re-measure its section)"
    )


def test_every_block_has_a_renderer_and_the_readme_quotes_the_main_ones():
    names = {name for doc in REGEN.DOCS for name in REGEN.blocks_in(doc.read_text())}
    assert names <= set(REGEN.BLOCKS), names - set(REGEN.BLOCKS)
    assert {"machine", "summary", "results", "ablation", "quick_sweep", "patching"} <= names
    assert {"summary", "ablation_sentence", "quick_sweep_summary"} <= set(
        REGEN.blocks_in((ROOT / "README.md").read_text())
    )


README_SECTIONS = [
    "Quick start",
    "What a run gives you",
    "Follow the course",
    "Notebooks",
    "Sweep the heads",
    "Look inside",
    "Where to go next",
]


def test_the_readme_is_the_learners_front_page():
    """At most 250 lines, the sections a learner comes for in order, and the set-up and test command CI runs."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    headings = re.findall(r"^#{2,3} (.+)$", text, re.M)
    assert headings == README_SECTIONS, headings
    ci = (ROOT / ".ci" / "run").read_text()
    for command in ("torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu", '-e ".[dev]"'):
        assert command in text and command in ci, command
    assert "python -m pytest\n" in text and "python -m pytest " in ci
    assert '-e ".[notebooks]"' in text and '-e ".[notebooks]"' in ci


def test_the_readme_and_the_course_page_read_on_a_screen():
    """The front page is short (at most 250 lines and 12 KB) and neither it nor docs/course.md, the learner's own
    page, has a line over 120 characters, measured blocks, tables and code included; the README says no where and
    when of a measurement (docs/results.md does, beside the tables), and the summary it shows speaks the course's
    words."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250 and len(readme.encode()) <= 12_000, (len(readme.splitlines()), len(readme))
    for doc in ("README.md", "docs/course.md"):
        wide = [line for line in (ROOT / doc).read_text().splitlines() if len(line) > 120]
        assert wide == [], f"{doc}: {len(wide)} lines over 120 characters, the first: {wide[:1]}"
    for provenance in ("load ", "at commit", "regenerate.py last measured", "upper bounds"):
        assert provenance not in readme, provenance
    summary = REGEN.BLOCKS["summary"](MEASURED).lower()  # the default run's summary, in the course's words
    assert not any(word in summary for word in ("logit", "attribution", "patching")), summary


def test_where_and_when_is_said_beside_every_measured_table_in_docs():
    """A docs page showing a section's table says beside it when, at which commit and under what load that section
    was measured (a when_<section> block); the README points to docs/results.md instead. A GPU section's block
    names its card, day and commit itself: it is measured on another machine than the rest."""
    owner = {
        name: section
        for section, module in REGEN.MODULES.items()
        if not getattr(module, "NEEDS_GPU", False)
        for name in module.BLOCKS
    }
    for doc in REGEN.DOCS[1:]:
        shown = REGEN.blocks_in(doc.read_text())
        tables = {owner[b] for b in shown if b in owner and "\n|" in REGEN.BLOCKS[b](MEASURED)}
        missing = {section for section in tables if f"when_{section}" not in shown}
        assert missing == set(), f"{doc.name}: no when_<section> block beside the tables of {sorted(missing)}"


def test_every_section_module_holds_its_command_its_run_and_its_rendering():
    """docs/measure/: one module per section, each defining COMMAND, measure and BLOCKS side by side; common.py is
    the one module of shared helpers."""
    modules = {p.stem for p in (ROOT / "docs" / "measure").glob("*.py")} - {"__init__", "common"}
    assert modules == {s.name for s in REGEN.SECTIONS} == set(REGEN.MODULES)
    for name, module in REGEN.MODULES.items():
        assert isinstance(module.COMMAND, str) and module.COMMAND, name
        assert callable(module.measure) and module.measure.__doc__, name
        assert isinstance(module.BLOCKS, dict) and all(callable(b) for b in module.BLOCKS.values()), name
    owners = [name for module in REGEN.MODULES.values() for name in module.BLOCKS]
    assert len(owners) == len(set(owners)), "a block is rendered by two sections"


def shown_images() -> list[tuple[Path, Path]]:
    """(document, image file) for every image a document shows."""
    found = []
    for doc in REGEN.DOCS:
        for target in IMAGE.findall(doc.read_text()):
            found.append((doc, (doc.parent / target).resolve()))
    return found


def drawn() -> dict[str, str]:
    """docs/images name -> hash of the code that drew it, from every section's JSON."""
    return {name: digest for facts in MEASURED.values() for name, digest in (facts.get("images") or {}).items()}


@pytest.mark.parametrize("doc,image", shown_images(), ids=lambda x: x.name if isinstance(x, Path) else str(x))
def test_every_shown_figure_was_drawn_by_the_code_as_it_is_now(doc, image):
    assert image.is_file(), f"{doc.name} shows {image}, which does not exist"
    assert image.parent == REGEN.IMAGES, f"{doc.name} shows {image}, outside docs/images"
    name = image.name
    assert name in REGEN.DRAWN_BY, f"docs/regenerate.py does not know what draws {name}"
    recorded = drawn().get(name)
    assert recorded is not None, f"{name}: no section of docs/measured/ drew it; run python docs/regenerate.py"
    section = next(s for s, facts in MEASURED.items() if name in (facts.get("images") or {}))
    assert recorded == REGEN.code_hash(REGEN.DRAWN_BY[name]), (
        f"{name} is older than the code that draws it ({', '.join(REGEN.DRAWN_BY[name])}); "
        f"run  python docs/regenerate.py --only {section}"
    )


def test_no_image_in_docs_images_is_left_unshown():
    shown = {image.name for _, image in shown_images()}
    assert {p.name for p in REGEN.IMAGES.glob("*.png")} <= shown


def test_where_and_when_is_said_once_for_every_measured_section():
    machine = MEASURED.get("machine", {})
    on_a_card = {name for name, m in REGEN.MODULES.items() if getattr(m, "NEEDS_GPU", False)}  # stamps its parts
    sections = set(MEASURED) - {"machine"} - on_a_card
    assert sections <= set(machine.get("sections", {})), sections - set(machine.get("sections", {}))
    for name, when in machine.get("sections", {}).items():
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", when["date"]) and when["commit"], (name, when)
        assert when.get("cpu"), f"{name}: which CPU measured it (the machines differ from session to session)"


def test_a_sections_stamp_names_its_own_cpu_not_the_latest_machines():
    common = REGEN.common
    machine_json = {
        "machine": {"cpu": "CPU B", "cores": 2, "os": "Linux", "python": "3.11", "torch": "2"},
        "sections": {
            "old": {"date": "2026-01-01", "commit": "abc", "load": [0.0, 1.0], "runs": "x", "cpu": "CPU A"},
            "new": {"date": "2026-01-02", "commit": "def", "load": [0.0, 1.0], "runs": "y", "cpu": "CPU B"},
        },
    }
    m = {"machine": machine_json}  # what the renderers read: docs/measured/<name>.json by name
    assert "2-core CPU A machine" in common.measured_at("old")(m)
    table = common.block_machine(m)
    assert "| `old` | 2026-01-01 | abc | CPU A |" in table and "| `new` | 2026-01-02 | def | CPU B |" in table


def test_a_section_whose_extra_is_missing_stops_before_anything_runs(monkeypatch, tmp_path):
    """A section needing an optional package that is not installed: one line naming the pip command, before any
    section (the default run's minute, or an hour of others) runs or anything in docs/measured is written."""
    ran = []
    sections = [
        REGEN.Section("first", lambda scratch: ran.append("first") or {}, "instant"),
        REGEN.Section("needs", lambda scratch: ran.append("needs") or {}, "instant", ("no_such_package_xyz",)),
    ]
    monkeypatch.setattr(REGEN, "SECTIONS", sections)
    monkeypatch.setattr(REGEN, "MEASURED", tmp_path / "measured")
    with pytest.raises(SystemExit) as stop:
        REGEN.main(["--only", "first", "needs", "--keep", str(tmp_path / "scratch")])
    message = str(stop.value.code)
    assert "the needs section" in message and "pip install" in message and "\n" not in message
    assert ran == [] and not (tmp_path / "measured").exists()


def test_a_stale_figure_and_a_drifted_number_are_caught():
    facts = {"default": json.loads(json.dumps(MEASURED.get("default") or {"report_kb": 77}))}
    facts["default"]["report_kb"] = 77
    text = "page: <!-- measured:report_kb -->68 KB<!-- /measured -->."
    assert REGEN.render(text, facts) == "page: <!-- measured:report_kb -->77 KB<!-- /measured -->."
    assert REGEN.code_hash(["analysis/plots.py"]) != REGEN.code_hash(["analysis/maps.py"])


# ---- links point somewhere ------------------------------------------------------------------------------
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(doc: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings (lower case, punctuation dropped, spaces to hyphens)."""
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("doc", REGEN.DOCS, ids=lambda p: p.name)
def test_every_link_points_to_a_file_and_heading_that_exist(doc):
    """A page moved or a heading renamed breaks the links to it: every relative link resolves, anchor included."""
    broken = []
    for target in LINK.findall(re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(target)
    assert broken == [], f"{doc.name}: links to nothing: {broken}"


def test_the_link_check_sees_a_missing_heading():
    assert "10-digit-addition-experimentadd10" in anchors(ROOT / "docs" / "arithmetic.md")
    assert "no-such-heading" not in anchors(ROOT / "docs" / "arithmetic.md")


# ---- no making-of sentences -----------------------------------------------------------------------------
# A README states what is true now and how to reproduce it; how and when the project was built is git's.
MAKING_OF = [
    r"previous (version|round|recipe)",
    r"this round",
    r"(earlier|last|next) round",
    r"once crashed",
    r"\btoday(?:'s)?\b",
    r"lent one by chance",
    r"\bsessions?\b that built",
    r"the issue that asked",
    r"\bold recipe\b",
    r"restructuring",
    r"at commit [0-9a-f]{7}",
    r"as on the day",
    r"used to (be|take|run)",
    r"before and after (this|the|that) change",
    r"\bwas then\b",
    r"what (was|we) tried",
    r"changes? bought",
]
ALLOWED = {"docs/measured"}  # the one place that names the commit a figure was measured at (machine.json)


def prose(text: str) -> str:
    """The text without code blocks, inline code and measured blocks (rendered from docs/measured/)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = REGEN.BLOCK.sub("", text)
    return re.sub(r"`[^`]*`", "", text)


@pytest.mark.parametrize("doc", REGEN.DOCS, ids=lambda p: p.name)
def test_no_sentence_narrates_how_the_project_was_made(doc):
    found = [
        f"{doc.name}: ...{m.string[max(0, m.start() - 40) : m.end() + 40]!r}..."
        for pattern in MAKING_OF
        for m in re.finditer(pattern, prose(doc.read_text()), re.I)
    ]
    assert found == [], "\n".join(found)


def test_the_phrase_check_sees_a_making_of_sentence():
    text = "The previous version of this table was measured at commit 9f6daf7, before this round."
    assert sum(bool(re.search(p, prose(text), re.I)) for p in MAKING_OF) >= 3


# ---- figures come from docs/measured ---------------------------------------------------------------------
# A measured-looking figure (a decimal percentage, seconds, a rate) outside a measured block was copied by hand:
# it drifts. Targets and thresholds are whole numbers or named here.
FIGURE = re.compile(
    r"\d+\.\d+\s?%|\d+ min \d+ s|\d+\.\d+ s\b|\d+(\.\d+)? ?ms (per|a) step"
    r"|\d[\d,.]* ?(GFLOP/s|tokens/s|problems/s|steps/s)"
)
TARGETS = ("Time to 99.9%", "stopped at 0.2%")  # a target; an example of a run still training


@pytest.mark.parametrize("doc", REGEN.DOCS, ids=lambda p: p.name)
def test_measured_figures_live_in_measured_blocks(doc):
    text = re.sub(r"```.*?```", "", REGEN.BLOCK.sub("", doc.read_text()), flags=re.S)
    found = [line for line in text.splitlines() if FIGURE.search(line) and not any(t in line for t in TARGETS)]
    assert found == [], f"{doc.name}: figures written by hand (render them from docs/measured/):\n" + "\n".join(found)


def test_the_figure_check_sees_a_hand_copied_figure():
    assert FIGURE.search("the default run trains at 17.8 ms per step, 22.9 s in all, 63.5% of it in matmuls")
    assert not FIGURE.search("every validation problem right (99% is not enough) within 1,800 steps")


def test_redraw_draws_a_sections_figure_again_from_its_recorded_runs(tmp_path, monkeypatch):
    """--redraw length: the figure drawn by today's code from docs/measured/length.json's runs, and its hash noted."""
    common = REGEN.common
    (tmp_path / "measured").mkdir()
    (tmp_path / "measured" / "length.json").write_text((REGEN.MEASURED / "length.json").read_text())
    monkeypatch.setattr(REGEN, "MEASURED", tmp_path / "measured")
    monkeypatch.setattr(common, "IMAGES", tmp_path)
    monkeypatch.setattr(REGEN, "render_docs", lambda measured=None: [])
    assert REGEN.main(["--redraw", "length"]) == 0
    facts = json.loads((tmp_path / "measured" / "length.json").read_text())
    assert facts["images"] == {"length.png": common.code_hash(REGEN.DRAWN_BY["length.png"])}
    assert (tmp_path / "length.png").stat().st_size > 10_000


def test_the_gpu_section_says_its_card_and_day_and_what_was_not_measured():
    """docs/measured/gpu.json comes from a borrowed card, part by part (GPU_PARTS): the block names the card and
    each part's day and commit, and a part never run there says so instead of a figure; without CUDA, --only gpu
    is one error line and the full regeneration leaves the section alone."""
    gpu = REGEN.MODULES["gpu"]
    facts = MEASURED["gpu"]
    block = gpu.block_gpu(MEASURED)
    assert facts["card"]["gpu"] in block
    for part, stamp in facts["measured"].items():
        assert f"{stamp['date']} at commit {stamp['commit']}" in block, part
    without_tests = {"gpu": {k: v for k, v in facts.items() if k != "tests"}}
    assert "not run on a card yet" in gpu.block_gpu(without_tests)
    if not REGEN.gpu_here():
        done = subprocess.run(
            [sys.executable, "docs/regenerate.py", "--only", "gpu"], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode != 0 and done.stderr.strip().count("\n") == 0 and "NVIDIA GPU" in done.stderr
        assert all(not s.needs_gpu for s in REGEN.SECTIONS if s.name != "gpu")


def test_the_published_tables_last_row_is_ours_at_our_trained_length():
    """Our row says how long our runs trained on, not the last paper's (the table's rows once shared a name)."""
    table = REGEN.MODULES["long_times_short"].published_table
    runs = [{"command": "python train.py experiment=mul_n1", "seed": s, "length": {"*": {"9": 1.0, "20": 1.0}}}
            for s in (0, 1)]  # fmt: skip
    rows = table({"runs": runs}, "mul_n1", (("a paper", 5, 35),), ", N x 1", 9).splitlines()
    assert rows[2] == "| a paper | 5 digits | 35 digits | 7.0x |"
    assert rows[3].endswith("| 9 digits | 20 / 20 digits (every length measured, >= 99%) | 2x |")


def test_the_commit_stamp_is_dirty_for_code_not_for_what_a_measurement_writes(tmp_path, monkeypatch):
    """--only a b: the second section's stamp names the same commit as the first, whose figures are now written."""
    common = REGEN.common
    for sub in ("docs/measured", "model"):
        (tmp_path / sub).mkdir(parents=True)
    for name in ("docs/measured/a.json", "docs/arithmetic.md", "model/block.py"):
        (tmp_path / name).write_text("before\n")

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "start")
    monkeypatch.delenv("TINYCALC_COMMIT", raising=False)
    monkeypatch.setattr(common, "ROOT", tmp_path)
    (tmp_path / "docs/measured/a.json").write_text("measured\n")
    (tmp_path / "docs/arithmetic.md").write_text("rendered\n")
    assert "uncommitted" not in common.commit()
    (tmp_path / "model/block.py").write_text("changed\n")
    assert common.commit().endswith("(+ uncommitted changes)")
