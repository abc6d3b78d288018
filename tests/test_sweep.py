"""Hydra multirun: one run per setting, a failing setting fails alone, and the summary compares them."""

from __future__ import annotations

import csv

import pytest

from tests.conftest import run_sweep
from tests.test_html_report import Page


def test_a_two_job_sweep_with_a_bad_value_writes_a_summary(small_sweep):
    tmp_path, done = small_sweep  # model.n_heads=3,2 (tests/conftest.py), shared with test_html_report.py
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "n_heads=3" in errors[0]

    with (tmp_path / "sweep_summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["run"] for r in rows] == ["model.n_heads=3", "model.n_heads=2"]
    bad, good = rows
    assert bad["status"].startswith("failed: model.n_heads=3") and bad["test_exact_match"] == ""
    assert good["status"] == "ok" and good["head_dim"] == "32"
    assert 0 <= float(good["test_exact_match"]) <= 1 and int(good["n_params"]) > 0
    assert good["steps_to_99"] == "" or int(good["steps_to_99"]) % 50 == 0  # measured at validation steps
    assert (tmp_path / "sweep_summary.png").stat().st_size > 10_000
    assert "model.n_heads=2" in (tmp_path / "sweep_summary.md").read_text()
    (second,) = tmp_path.glob("1_*")  # one directory per job, named by its number and overrides
    assert (second / "history.json").exists() and (second / "results.json").exists()


def test_seeds_are_averaged_per_setting_not_across_settings():
    from analysis.sweep import grouped_over_seeds

    def row(run, em, steps):
        return {
            "run": run,
            "status": "ok",
            "test_exact_match": em,
            "steps_to_99": steps,
            "train_seconds": 1.0,
            "prunable_fraction": None,
        }

    rows = [
        row("fmt=a seed=0", 1.0, 100),
        row("fmt=a seed=1", 0.5, 300),
        row("fmt=b seed=0", 0.2, None),
        row("fmt=b seed=1", 0.4, 500),
        row("fmt=c seed=0", 0.9, 200),
    ]
    groups = {g["setting"]: g for g in grouped_over_seeds(rows)}
    assert set(groups) == {"fmt=a", "fmt=b"}  # fmt=c ran one seed: nothing to average
    assert groups["fmt=a"]["test_exact_match"] == (0.75, 0.5, 1.0)
    assert groups["fmt=a"]["steps_to_99"] == (200, 100, 300)
    assert groups["fmt=b"]["steps_to_99"] == (500, 500, 500)  # a run that never reached 99% is left out
    assert groups["fmt=a"]["prunable_fraction"] is None


def test_why_multi_head_writes_its_comparison_and_verdict(tmp_path):
    # 50 steps, not SMALL_SWEEP's 200: at 200 neither model learns either; what is checked is the comparison's wiring
    steps = ["trainer.max_steps=50", "trainer.val_check_interval=25"]
    done = run_sweep(tmp_path, "experiment=why_multi_head", "analysis.n_problems=100", *steps)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "why multiple heads?" in done.stdout and "1 head x 64 dims" in done.stdout
    assert "4 heads x 16 dims" in done.stdout and "Traceback" not in done.stderr
    assert (tmp_path / "why_multi_head.png").stat().st_size > 10_000
    verdict = (tmp_path / "why_multi_head.md").read_text()
    assert "distinct role(s) among its 2 heads" in verdict and "among its 8 heads" in verdict


# ---- the conclusion (analysis/conclusion.py): said from the sweep's own numbers, no stronger ----------------


def job(n, seed, steps, em=1.0, prunable=0.25, status="ok", seconds=10.0):
    """One summary row (analysis.sweep.summarise's shape) of a head-count sweep."""
    return {
        "run": f"model.n_heads={n} seed={seed}",
        "n_heads": n,
        "head_dim": 64 // n,
        "seed": seed,
        "n_params": 100_000,
        "attention_params": 33_000,
        "steps_to_99": steps,
        "test_exact_match": em if status == "ok" else None,
        "train_seconds": seconds,
        "prunable_fraction": prunable,
        "learned": em >= 0.9,
        "status": status,
        "history": [{"step": steps or 500, "exact_match": 1.0 if steps else 0.5}],
    }


THREE_SEEDS = [job(1, s, steps, prunable=0.0) for s, steps in enumerate((300, 400, 325))] + [
    job(4, s, steps) for s, steps in enumerate((200, 225, 200))
]
CONCLUSIONS = {
    # the question the quick sweep asks: steps with their range over seeds, the same parameters, prunable heads
    "three seeds that agree": (
        THREE_SEEDS,
        [
            "From 6 finished runs: 2 settings x 3 seeds (0, 1, 2).",
            "Steps to 99% val exact-match (range over seeds): 1 head 300..400 (median 325); 4 heads 200..225 "
            "(median 200).",
            "Fewest steps (median over seeds, runs that all reached it): 4 heads (200).",
            "Test exact-match: every run 100.00%, a tie; no setting is better on it.",
            "Every setting has the same parameter count (100,000).",
            "4 heads against 1 head: fewer steps on seeds 0, 1, 2 (their ranges do not overlap: 200..225 against "
            "300..400); a higher prunable fraction on seeds 0, 1, 2.",
            "The seeds agree on every comparison above (none went both ways).",
        ],
        ["best", "disagree:"],
    ),
    "a tie of two out of three": (
        [job(1, 0, 300, em=0.9990), job(2, 0, 250), job(4, 0, 250)],
        [
            "One seed per setting: no spread, so nothing here tells a setting's effect from one seed's luck.",
            "Fewest steps (median over seeds, runs that all reached it): 2 heads, 4 heads (250, a tie of 2).",
            "Test exact-match: best 100.00%, a tie of 2 runs (2 heads, 4 heads); by setting: 1 head 99.90%; "
            "2 heads 100.00%; 4 heads 100.00%.",
        ],
        ["These are", "disagree"],  # one seed: no trend, no disagreement to speak of
    ),
    "seeds that disagree": (
        [
            job(1, 0, 300),
            job(1, 1, 300),
            job(2, 0, 250),
            job(2, 1, 350),
            job(8, 0, 200),
            job(8, 1, None, em=0.5, prunable=None),
        ],
        [
            "Steps to 99% val exact-match (range over seeds): 1 head 300; 2 heads 250..350 (median 300); "
            "8 heads 200 (1 of 2 never).",
            "2 heads against 1 head: fewer steps on seed 0; more steps on seed 1 (their ranges overlap: 250..350 "
            "against 300); the same prunable fraction on seeds 0, 1.",
            "Where the seeds disagree: 8 heads reached 99% on seed 0 but never on seed 1; 2 heads against 1 head "
            "on steps to 99%.",
            "Fewest steps (median over seeds, runs that all reached it): 1 head, 2 heads (300, a tie of 2).",
            "These are 2 seeds on one task: a trend over them, not a law; ranges that overlap do not separate the "
            "settings.",
        ],
        ["8 heads (200"],  # the fewest: 8 heads did not reach it on every seed; 1 and 2 heads tie (median 300)
    ),
    "a failed job is left out, never compared": (
        [job(1, 0, 300), job(2, 0, None, status="failed: n_heads=3 does not divide d_model=64")],
        ["From 1 finished run: 1 setting x 1 seed (0); 1 run failed, left out."],
        ["against"],
    ),
    "nothing finished": (
        [job(2, 0, None, status="failed: killed")],
        ["No run finished (1 failed): nothing to conclude."],
        ["Steps"],
    ),
}


@pytest.mark.parametrize("rows, says, never", CONCLUSIONS.values(), ids=CONCLUSIONS.keys())
def test_the_conclusion_says_what_the_sweep_measured_no_stronger(rows, says, never):
    from analysis.conclusion import conclude

    lines = conclude(rows)
    for line in says:
        assert line in lines, "\n".join(lines)
    for word in never:
        assert not any(word in line for line in lines), "\n".join(lines)


def test_the_summary_and_the_page_end_with_the_same_conclusion(tmp_path):
    from analysis.conclusion import conclude
    from analysis.html_report import sweep_data
    from analysis.sweep import markdown
    from storage.rundir import SweepDir

    md = markdown(THREE_SEEDS)
    assert md.endswith("\n".join(["## Conclusion", "", *(f"- {line}" for line in conclude(THREE_SEEDS))]) + "\n")
    failed = [job(2, 0, None, status="failed: killed")]  # no report to write for it: sweep_data reads no file
    (tmp_path / "0_model.n_heads=2" / ".hydra").mkdir(parents=True)
    (tmp_path / "0_model.n_heads=2" / ".hydra" / "overrides.yaml").write_text("- model.n_heads=2\n")
    assert sweep_data(SweepDir(tmp_path), failed)["conclusion"] == conclude(failed)


def test_the_sweep_page_calls_a_tie_a_tie_and_ends_with_the_conclusion(browser, tmp_path):
    from analysis.conclusion import conclude
    from analysis.html_report import render
    from analysis.sweep import grouped_over_seeds
    from data.problems import MASTERED

    def page(rows):
        shown = [row | {"report": None, "dir": row["run"], "error_log": None} for row in rows]
        data = {"kind": "sweep", "name": "t", "rows": shown, "grouped": grouped_over_seeds(rows)}
        data |= {"milestone": MASTERED, "heads": [], "conclusion": conclude(rows)}
        path = tmp_path / f"sweep_report_{len(rows)}.html"
        path.write_text(render(data, "t"))
        return Page(browser, path)

    view = page(THREE_SEEDS)  # six runs at 100.00%: no run is the best
    assert view.page.inner_text("#summary .card:last-child").splitlines() == [
        "100.00%",
        "best test exact-match: a tie of all 6 runs",
    ]
    shown = view.page.eval_on_selector_all("#conclusion li", "els => els.map(e => e.textContent)")
    assert shown == conclude(THREE_SEEDS)
    assert view.page.eval_on_selector_all("main > section", "els => els.at(-1).id") == "conclusion"
    view.offline_and_clean()

    partly = [job(1, 0, 300, em=0.999), job(2, 0, 250), job(4, 0, 250)]
    assert "a tie of 2 runs" in page(partly).text("#summary")
    alone = [job(1, 0, 300, em=0.999), job(2, 0, 250)]
    assert "best test exact-match (model.n_heads=2 seed=0)" in page(alone).text("#summary")


def test_every_symbol_a_role_line_can_hold_is_explained_where_the_roles_are_shown():
    """A role line (analysis/metrics/roles.py) reads e.g. "reads r0<-a0+b0 r1<-~ r2<-=": the roles' intro, which
    every page shows above them, says what each kind of symbol means."""
    from analysis.metrics.roles import Roles
    from data.build import problem_format
    from data.positions import positions

    kinds = set()
    for fmt in (problem_format(), problem_format(operators="+-"), problem_format(operators="*", show_work=True)):
        kinds |= {position.short for position in positions(fmt)}
    example = {"a": "a2", "b": "b0", "r": "r0", "w": "w1.2"}  # a digit's symbol: its kind, its place (and line)
    explained = {example.get(kind[0], kind) if kind[-1].isdigit() else kind for kind in kinds}
    for symbol in explained | {"~", "x<-y", "a1+b1", "a1·b1"}:
        assert f"{symbol} = " in Roles.intro or f"{symbol} reads" in Roles.intro or f"({symbol} for" in Roles.intro, (
            symbol
        )
