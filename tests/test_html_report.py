"""report.html and sweep_report.html: written from a real sweep, opened in headless Chromium.

One small real sweep (a job that fails on a bad value, one that trains) gives both a sweep directory and a
real run directory. The browser tests skip only where no Chromium is installed (CI installs Debian's).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from analysis.html_report import MAX_MISTAKES, write_run_report
from analysis.metric import UNITS, VIEWS
from analysis.registry import analyses
from tests.conftest import ROOT

MISTAKES = {
    "n_test": 200,
    "n_mistakes": 2,
    "mistakes": [
        {"problem": "12+34", "model": 47, "model_text": "740", "truth": 46},
        {"problem": "99+1", "model": None, "model_text": "0+1", "truth": 100},
    ],
}


@pytest.fixture(scope="module")
def sweep_dir(small_sweep) -> Path:
    path, done = small_sweep
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"sweep report: {path / 'sweep_report.html'}" in done.stdout
    from analysis.conclusion import conclude
    from analysis.sweep import summarise
    from storage.rundir import SweepDir

    said = done.stdout.split("conclusion:\n", 1)[1].split("sweep summary: ")[0]  # the terminal says the conclusion
    assert " ".join(said.split()) == " ".join(f"- {line}" for line in conclude(summarise(SweepDir(path)))).strip()
    return path


@pytest.fixture(scope="module")
def run_dir(sweep_dir) -> Path:
    """The sweep's job that trained: a real run directory, its mistakes replaced by a known set to render."""
    (job,) = sweep_dir.glob("1_*")
    recorded = json.loads((job / "test_mistakes.json").read_text())  # what training wrote
    results = json.loads((job / "results.json").read_text())
    assert recorded["n_mistakes"] == round(recorded["n_test"] * (1 - results["test_exact_match"]))
    assert (job / "report.html").exists()  # written at the end of the run
    assert inlined_data((job / "report.html").read_text())["lab"]["weights"]  # a sweep's job carries its lab too
    (job / "test_mistakes.json").write_text(json.dumps(MISTAKES))
    write_run_report(job)
    return job


def inlined_data(html: str) -> dict:
    blob = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', html, re.S).group(1)
    return json.loads(blob)


def test_every_unit_and_view_an_analysis_may_declare_is_one_the_page_draws():
    """analysis/metric.py's UNITS and VIEWS (what registering an analysis accepts) are the page's: a unit it does not
    format would be drawn as text on white cells, a view it does not know not at all."""
    page = (ROOT / "analysis" / "report_page.js").read_text()
    formats = re.search(r"const byUnit = \{(.*?)\n  \};", page, re.S).group(1)
    assert set(re.findall(r"^\s*(\w+):", formats, re.M)) | {""} == set(UNITS)
    assert {"table", *re.findall(r'a\.view === "(\w+)"', page)} == set(VIEWS)
    assert {a.view for a in analyses()} <= set(VIEWS) and {c.unit for a in analyses() for c in a.columns} <= set(UNITS)


def test_the_page_is_one_file_with_the_raw_weights_inside(run_dir):
    html = (run_dir / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)  # nothing fetched from anywhere
    assert not re.search(r"<(link|script)[^>]*\s(src|href)=", html.replace('<link rel="icon" href="data:,">', ""))
    assert len(html) < 1_000_000  # the model itself (the lab) is most of it
    data = inlined_data(html)
    final = json.loads((run_dir / "attention" / "final.json").read_text())
    shown = data["attention"][-1]
    assert shown["probes"] == final["probes"] and shown["tokens"] == final["tokens"]
    for layer, probes in enumerate(final["weights"]):  # every weight on or below the diagonal, 3 decimals
        for p, heads in enumerate(probes):
            for h, rows in enumerate(heads):
                for q, row in enumerate(rows):
                    assert shown["weights"][layer][p][h][q] == pytest.approx(row[: q + 1], abs=5.01e-4)
    assert data["key_labels"][:3] == ["^", "a1", "a0"] and data["answer_places"] == ["r0", "r1", "r2"]
    assert data["mistakes"]["wrong_digits_by_place"] == [1, 1, 0]  # 740 vs 640 (46); 0+1 vs 001 (100)
    assert len(data["history"]) == 4 and data["results"]["status"] == "ok"


def test_a_long_mistakes_list_is_trimmed_but_counted(tmp_path, run_dir):
    for name in ("results.json", "history.json", "config.yaml"):
        shutil.copy(run_dir / name, tmp_path / name)
    many = [{"problem": f"{i}+1", "model": i, "model_text": "", "truth": i + 1} for i in range(MAX_MISTAKES + 20)]
    (tmp_path / "test_mistakes.json").write_text(json.dumps({"n_test": 200, "n_mistakes": len(many), "mistakes": many}))
    data = inlined_data(write_run_report(tmp_path).read_text())
    assert data["mistakes"]["n_mistakes"] == MAX_MISTAKES + 20 and len(data["mistakes"]["mistakes"]) == MAX_MISTAKES
    assert data["attention"] == []  # missing files: sections say "not recorded"
    assert [a["name"] for a in data["analyses"]] == [a.name for a in analyses()]  # registered, none recorded here
    assert all(a["rows"] is None for a in data["analyses"])


def test_data_is_never_read_as_a_placeholder(tmp_path, run_dir):
    """A setting or a directory name that spells the template's placeholders is shown as written."""
    for name in ("results.json", "history.json"):
        shutil.copy(run_dir / name, tmp_path / name)
    (tmp_path / "config.yaml").write_text("logger:\n  notes: '{{SCRIPT}} {{DATA}} {{TITLE}}'\n")
    named = tmp_path / "{{DATA}}"
    shutil.copytree(tmp_path, named)
    for directory in (tmp_path, named):
        html = write_run_report(directory).read_text()
        data = inlined_data(html)
        assert "{{SCRIPT}} {{DATA}} {{TITLE}}" in data["config"]
        assert html.count("DATA = JSON.parse") == 1  # the script inlined once, where the template has it
    assert "<title>tinycalc run {{DATA}}</title>" in html


def test_the_command_rewrites_a_directory_and_refuses_anything_else(tmp_path, sweep_dir, capsys):
    from analysis.html_report import main

    (tmp_path / "notes.txt").write_text("not a run")
    assert main([str(tmp_path)]) == 1  # its main() in this process (an exception would fail the test)...
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {tmp_path} is neither a run directory (no results.json) nor a sweep directory (no multirun.yaml)"
    ]
    command = [sys.executable, "-m", "analysis.html_report"]  # ...and the command itself, as a user runs it
    (failed_job,) = sweep_dir.glob("0_*")  # n_heads=3: failed before training
    (sweep_dir / "sweep_report.html").unlink()
    done = subprocess.run([*command, str(sweep_dir)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sweep_dir / "sweep_report.html") and (sweep_dir / "sweep_report.html").exists()
    assert not (failed_job / "report.html").exists()  # a failed job has no report; the sweep page says why


# ---- in the browser --------------------------------------------------------------------------------------------


class Page:
    """A page opened from file:// that records every request and every console error."""

    def __init__(self, browser, path: Path):
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.requests, self.errors = [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.url = path.as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-rendered]", timeout=10_000)

    def text(self, selector: str) -> str:
        return self.page.inner_text(selector)

    def offline_and_clean(self) -> None:
        assert self.requests == [self.url]  # the page itself, nothing else
        assert self.errors == []
        # drawn at all, in seconds rather than minutes: its speed is python bench.py lab's to measure (a busy
        # machine's second test worker and browser made 1 s a flaky bound)
        assert float(self.page.evaluate("document.body.dataset.renderMs")) < 5000


def painted(page, selector: str) -> list[int]:
    """How many distinct colours each canvas matching ``selector`` holds (1 = blank)."""
    return page.evaluate(
        """sel => [...document.querySelectorAll(sel)].map(c => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, seen = new Set();
        for (let i = 0; i < d.length; i += 4) seen.add(d[i] << 16 | d[i + 1] << 8 | d[i + 2]);
        return seen.size; })""",
        selector,
    )


def test_run_report_renders_every_section_offline(browser, run_dir, tmp_path):
    results = json.loads((run_dir / "results.json").read_text())
    n_layers, n_heads = results["n_layers"], results["n_heads"]
    view = Page(browser, run_dir / "report.html")
    page = view.page

    heads = page.eval_on_selector_all(".head-thumb", "els => els.map(e => [+e.dataset.layer, +e.dataset.head])")
    assert heads == [[layer, head] for layer in range(n_layers) for head in range(n_heads)]
    assert all(colours > 3 for colours in painted(page, ".head-thumb canvas"))  # each map drawn, not blank
    assert painted(page, "#attention-big")[0] > 3
    probes = json.loads((run_dir / "attention" / "final.json").read_text())["probes"]
    buttons = page.eval_on_selector_all("#attention .controls button.mono", "els => els.map(e => e.textContent)")
    assert buttons == probes  # one button per probe problem
    assert view.text("#attention-title").startswith("layer 0, head 0")
    page.keyboard.press("ArrowRight")  # flip to the next head
    assert view.text("#attention-title").startswith("layer 0, head 1")
    role = results["head_roles"]["L0h1"]
    assert role in view.text("#attention .caption")

    history = json.loads((run_dir / "history.json").read_text())["val"]
    assert page.locator("#curves svg path.series").count() == 2
    assert page.locator("#curves svg").first.locator("circle").count() == len(history)

    cells = page.eval_on_selector_all("#ablation table.heat td", "els => els.map(e => e.textContent)")
    assert len(cells) == 2 * n_layers * n_heads  # zero and mean, every layer x head
    zero_l0h0 = next(
        line for line in (run_dir / "ablation.csv").read_text().splitlines() if line.startswith("0,0,zero,")
    )
    assert cells[0] == f"{100 * float(zero_l0h0.split(',')[4]):+.1f}".replace("-", "−")

    pruning_rows = (run_dir / "pruning.csv").read_text().strip().splitlines()[1:]
    assert page.locator("#pruning svg circle").count() == len(pruning_rows)
    roles = page.eval_on_selector_all("#roles table.heat td", "els => els.map(e => e.textContent)")
    assert roles == [results["head_roles"][f"L{layer}h{head}"] for layer in range(n_layers) for head in range(n_heads)]
    assert "2 of 200 held-out test problems answered wrong" in view.text("#mistakes")
    assert page.locator("#mistakes tbody tr").count() == 3 + 2  # 3 answer places, then the 2 mistakes
    view.offline_and_clean()
    page.screenshot(path=tmp_path / "report.png", full_page=True)
    assert (tmp_path / "report.png").stat().st_size > 50_000


def test_the_run_page_carries_its_model_in_the_lab(browser, run_dir):
    """The page's lab answers with the run's own best checkpoint: its answer to the problem it opens with is
    calc.py's, and a problem calc.py refuses is refused with calc.py's words."""
    from data.expressions import ExpressionError, parse_expression
    from model.checkpoint import load_calculator

    view = Page(browser, run_dir / "report.html")
    page = view.page
    calc = load_calculator(run_dir)
    problem = page.input_value("#lab .lab-problem")
    (expected,) = calc.answer([parse_expression(problem, calc.fmt)])
    assert page.inner_text("#lab .lab-result") == str(expected)
    assert page.locator("#lab .lab-switch").count() == calc.net.cfg.n_layers * calc.net.cfg.n_heads
    with pytest.raises(ExpressionError) as refused:
        parse_expression("1234+1", calc.fmt)
    page.fill("#lab .lab-problem", "1234+1")
    assert page.inner_text("#lab .lab-answer").split(";")[0] in f"error: {refused.value}"
    view.offline_and_clean()


def test_each_heads_story_is_one_sentence_the_same_in_results_the_terminal_and_the_page(browser, run_dir):
    """results.json's head_stories (analysis/metrics/head_story.py builds them) is what the terminal's researcher's
    view prints (verbose=true) and what the page shows: beside a head's map when it is clicked, on its lab switch
    and in the section's table."""
    import io

    from rich.console import Console

    from analysis.summary import print_summary

    results = json.loads((run_dir / "results.json").read_text())
    names = [f"L{layer}h{head}" for layer in range(results["n_layers"]) for head in range(results["n_heads"])]
    stories = results["head_stories"]
    assert list(stories) == names and all(stories[name].startswith(name) for name in names)
    assert len(set(stories.values())) == len(names)  # each its own

    console = Console(width=100_000, file=io.StringIO(), record=True)  # wide: no line is wrapped
    print_summary(results, console, verbose=True)
    terminal = console.export_text()
    if results["learned"]:  # a model that learned nothing gets one "not learned" line instead
        assert [text for _, text in results["analysis_summary"] if text in stories.values()] == list(stories.values())
        assert all(story in terminal for story in stories.values())
    else:
        assert all("has not learned" in story for story in stories.values())

    view = Page(browser, run_dir / "report.html")
    page = view.page
    for name in names:
        layer, head = name[1:].split("h")
        page.click(f'.head-thumb[data-layer="{layer}"][data-head="{head}"]')
        assert view.text("#attention .caption .story") == stories[name]
        assert page.get_attribute(f'#lab .lab-switch[data-head="{name}"]', "title") == stories[name]
    table = page.eval_on_selector_all("#head_story tbody tr", "rows => rows.map(r => r.lastChild.textContent)")
    assert table == list(stories.values())
    view.offline_and_clean()


def test_run_report_without_mistakes_says_not_recorded(browser, run_dir, tmp_path):
    for name in ("results.json", "history.json", "config.yaml", "ablation.csv", "pruning.csv"):
        shutil.copy(run_dir / name, tmp_path / name)
    shutil.copytree(run_dir / "attention", tmp_path / "attention")
    view = Page(browser, write_run_report(tmp_path))
    assert "Not recorded" in view.text("#mistakes")
    assert "not recorded" in view.text("#summary")
    view.offline_and_clean()


def test_a_run_without_analysis_and_a_failed_run_still_render(browser, run_dir, tmp_path):
    results = json.loads((run_dir / "results.json").read_text())
    for key in ("head_roles", "most_important_heads", "prunable_fraction", "pruning_curve", "images"):
        results.pop(key, None)  # what analysis=none leaves out
    bare, failed = tmp_path / "bare", tmp_path / "failed"
    bare.mkdir()
    failed.mkdir()
    (bare / "results.json").write_text(json.dumps(results))
    shutil.copy(run_dir / "history.json", bare / "history.json")
    view = Page(browser, write_run_report(bare))
    for section in ("#attention", "#ablation", "#pruning", "#roles"):
        assert "not recorded" in view.text(section).lower()
    assert view.page.locator("#curves svg path.series").count() == 2
    view.offline_and_clean()

    (failed / "results.json").write_text(json.dumps({"status": "failed", "error": "n_heads=3 does not divide 64"}))
    view = Page(browser, write_run_report(failed))
    assert "did not finish: n_heads=3 does not divide 64" in view.text("main")
    view.offline_and_clean()


def test_sweep_report_renders_offline_and_links_each_run(browser, sweep_dir, run_dir, tmp_path):
    view = Page(browser, sweep_dir / "sweep_report.html")
    page = view.page
    rows = page.eval_on_selector_all("#runs table tbody tr", "els => els.map(e => e.innerText)")
    assert len(rows) == 2 and "model.n_heads=3" in rows[0] and "failed" in rows[0]
    links = page.eval_on_selector_all("#runs a", "els => els.map(e => e.href)")
    assert [Path(unquote(urlparse(link).path)) for link in links] == [run_dir / "report.html"]
    assert (run_dir / "report.html").exists()
    assert page.locator("#curves svg path.series").count() == 1  # the job that trained
    assert "model.n_heads=2" in view.text("#curves .legend")
    failed = view.text("#failed table")
    assert "model.n_heads=3" in failed and "does not divide d_model=64" in failed
    for name in ("roles", "ablation", "dla"):  # every per-head analysis, a heatmap per finished run (one here)
        cells = page.eval_on_selector_all(f"#{name} table.heat td", "els => els.map(e => e.textContent)")
        assert len(cells) == 2 * 2, name  # 2 layers x 2 heads
    zero = [line.split(",") for line in (run_dir / "ablation.csv").read_text().splitlines()[1:]]
    shown = page.eval_on_selector_all("#ablation table.heat td", "els => els.map(e => e.textContent)")
    assert shown == [f"{100 * float(r[4]):+.1f}".replace("-", "−") for r in zero if r[2] == "zero"]
    view.offline_and_clean()
    page.screenshot(path=tmp_path / "sweep_report.png", full_page=True)
    assert (tmp_path / "sweep_report.png").stat().st_size > 20_000

    page.click("#runs a")  # and the link opens the run's own page, with its lab
    page.wait_for_selector("body[data-rendered='run']")
    assert page.locator(".head-thumb").count() == 2 * 2  # 2 layers x 2 heads
    assert page.locator("#lab .lab-switch").count() == 2 * 2


@pytest.mark.parametrize("name", ["javascript:alert(1)", "0_a=b#c?d", "data:text/html,x", "100%"])
def test_every_link_the_sweep_page_writes_is_a_path_beside_it(tmp_path, name):
    """A job directory named like a URL (``hydra.sweep.subdir=javascript:...``) gets a link that is still a relative
    path to its file: no scheme, '#' and '?' escaped, the same file once the browser unescapes it."""
    from urllib.parse import unquote, urlparse

    from analysis.html_report import page_link, sweep_data
    from storage.rundir import SweepDir

    job = tmp_path / name
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("[]\n")
    (job / "error.log").write_text("Traceback ...\n")
    link = page_link(f"{name}/error.log")
    assert urlparse(link).scheme == "" and not urlparse(link).fragment and not urlparse(link).query
    assert (tmp_path / unquote(urlparse(link).path)).resolve() == (job / "error.log").resolve()
    row = sweep_data(SweepDir(tmp_path), [{"run": name, "status": "failed"}])["rows"][0]
    assert row["error_log"] == link and row["report"] is None
