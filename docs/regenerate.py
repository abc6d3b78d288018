"""Regenerate the measured numbers and figures of the README and docs/ from real, seeded runs.

    python docs/regenerate.py                      every section, in order (see --list for what each costs)
    python docs/regenerate.py --only default quick_sweep
    python docs/regenerate.py --list               the sections: what each runs, what it writes, rough cost
    python docs/regenerate.py --render             only re-render the Markdown blocks from docs/measured/

Each section runs the project's own commands (train.py, docs/patching.py) in subprocesses with fixed seeds
and overrides, in a scratch directory, and writes

    docs/measured/<section>.json    the numbers, the images it drew and a hash of the code that drew each
    docs/measured/machine.json      where and when each section was measured (the one place that says so)
    docs/images/*.png               the figures the README and docs/ show

then re-renders every ``<!-- measured:NAME -->`` ... ``<!-- /measured -->`` block of README.md and docs/*.md
from those files (``BLOCKS`` below). tests/test_docs.py checks, without training, that every block equals its
rendering and that every image is newer than the code that draws it (by hash, not by file time).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import json
import operator
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the project's own modules, for the sections that read runs in-process
MEASURED = ROOT / "docs" / "measured"
IMAGES = ROOT / "docs" / "images"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = "runs/<run>"  # how a run directory is written in the docs

# the code that draws each figure: a figure is stale when any of these changed since it was drawn
DRAWN_BY = {
    "ablation.png": ["analysis/plots.py", "analysis/metrics/ablation.py"],
    "dla.png": ["analysis/plots.py", "analysis/metrics/dla.py"],
    "attention_layer0.png": ["analysis/plots.py", "analysis/maps.py"],
    "report.png": ["analysis/report_page.js", "analysis/report_page.html", "analysis/html_report.py"],
    "sweep_report.png": ["analysis/report_page.js", "analysis/report_page.html", "analysis/html_report.py"],
    "quick_sweep.png": ["analysis/plots.py", "analysis/sweep.py"],
    "head_sweep.png": ["analysis/plots.py", "analysis/sweep.py"],
    "why_multi_head.png": ["analysis/plots.py", "analysis/compare.py"],
    "patching.png": ["docs/patching.py"],
    "circuit.png": ["analysis/plots.py", "analysis/metrics/circuit.py"],
    "length.png": ["analysis/length_figure.py", "analysis/length.py"],
}


def code_hash(files: list[str]) -> str:
    digest = hashlib.sha256()
    for name in files:
        digest.update(name.encode() + b"\0" + (ROOT / name).read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return digest.hexdigest()[:16]


# ---- running the project's commands ---------------------------------------------------------------------
@dataclass
class Ran:
    stdout: str
    seconds: float
    peak_gb: float


def run(args: list[str], cwd: Path, ok: tuple[int, ...] = (0,), merged: bool = True) -> Ran:
    """``python <args>`` from ``cwd`` (wandb offline), timed as a whole command; stops with its output on failure.
    ``merged``: stderr is part of ``Ran.stdout`` (else it is shown only on failure)."""
    env = os.environ | {"WANDB_MODE": "offline", "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(
            [sys.executable, *args], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT if merged else err
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    if child.returncode not in ok:
        sys.exit(f"error: python {' '.join(args)} exited {child.returncode}:\n{(errors + text)[-3000:]}")
    return Ran(text, round(seconds, 1), round(usage.ru_maxrss / 2**20, 2))


def train(scratch: Path, *overrides: str) -> Ran:
    return run([str(ROOT / "train.py"), *overrides], scratch)


def results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def finished_jobs(sweep: Path) -> list[Path]:
    """The job directories of the multirun at ``sweep`` that wrote results.json, in job order."""
    from storage.rundir import SweepDir

    return [job.path for job in SweepDir(sweep).jobs() if job.results.is_file()]


def image(section_images: dict, source: Path, name: str) -> None:
    """Copy a drawn figure into docs/images and note what drew it."""
    shutil.copyfile(source, IMAGES / name)
    section_images[name] = code_hash(DRAWN_BY[name])


def screenshot(page: Path, out: Path, height: int, scratch: Path, width: int = 1300) -> bool:
    """A headless Chromium screenshot of ``page``, cropped to ``height`` pixels; False without Chromium. The page is
    shown from a copy in which the scratch directory's path is left out (runs/<run>, not /tmp/.../runs/<run>)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        return False
    with tempfile.TemporaryDirectory() as profile:
        shown = page.parent / f"shown-{page.name}"  # beside it: links to the run's other files still resolve
        shown.write_text(page.read_text().replace(f"{scratch.resolve()}/", "").replace(f"{scratch}/", ""))
        page = shown
        full = Path(profile) / "shot.png"
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height + 200}",
                "--virtual-time-budget=3000",
                f"--screenshot={full}",
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        from PIL import Image

        Image.open(full).crop((0, 0, width, height)).save(out, optimize=True)
    return True


def hide_scratch(text: str, scratch: Path) -> str:
    """``text`` with the scratch directory's path left out (runs/<run>); a line of a rich table keeps its width."""
    out = []
    for line in text.splitlines():
        for prefix in {f"{scratch.resolve()}/", f"{scratch}/"}:
            n = line.count(prefix)
            if n:
                line = line.replace(prefix, "")
                if line.rstrip().endswith("│"):
                    end = line.rstrip()
                    line = end[:-1] + " " * (n * len(prefix)) + "│"
        out.append(line)
    return "\n".join(out)


# ---- sections -------------------------------------------------------------------------------------------
def section_default(scratch: Path) -> dict:
    """python train.py (seed 0, the default config): the summary, Results row, ablation, DLA, maps, report."""
    ran = train(scratch, f"hydra.run.dir='{RUN}'")
    run_dir = scratch / RUN
    r = results(run_dir)
    with open(run_dir / "ablation.csv") as f:
        ablation = [row for row in csv.DictReader(f) if row["ablation"] == "zero"]
    with open(run_dir / "dla.csv") as f:
        dla = [row for row in csv.DictReader(f)]
    mistakes = json.loads((run_dir / "test_mistakes.json").read_text())
    images: dict[str, str] = {}
    image(images, run_dir / "ablation.png", "ablation.png")
    image(images, run_dir / "dla.png", "dla.png")
    image(images, sorted((run_dir / "attention").glob("final*layer0*.png"))[0], "attention_layer0.png")
    if screenshot(run_dir / "report.html", IMAGES / "report.png", 1500, scratch):
        images["report.png"] = code_hash(DRAWN_BY["report.png"])
    summary = hide_scratch(ran.stdout[ran.stdout.index("tinycalc run") :].rstrip(), scratch)
    return {
        "command": "python train.py",
        "steps": r["steps"],
        "train_seconds": r["train_seconds"],
        "whole_seconds": ran.seconds,
        "peak_gb": ran.peak_gb,
        "n_params": r["n_params"],
        "tokens_per_second": r["tokens_per_second"],
        "test_exact_match": r["test_exact_match"],
        "n_test": r["n_test"],
        "prunable_fraction": r.get("prunable_fraction"),
        "test_mistakes": mistakes.get("n_mistakes", len(mistakes.get("mistakes", []))),
        "report_kb": round((run_dir / "report.html").stat().st_size / 1000),
        "ablation_zero": {
            f"L{a['layer']}h{a['head']}": round(100 * float(a["delta_exact_match"]), 1) for a in ablation
        },
        "dla": sorted(
            (
                {"head": f"L{d['layer']}h{d['head']}", "logits": round(float(d["direct_logit"]), 2)}
                for d in dla
                if d["place"] == "all answer digits"
            ),
            key=lambda d: -d["logits"],
        )[:3],
        "summary": summary,
        "images": images,
        "run_dir": str(run_dir),
    }


def default_run(scratch: Path) -> Path:
    """The default section's run directory in ``scratch``, trained now when --only left that section out."""
    run_dir = scratch / RUN
    if not (run_dir / "results.json").is_file():
        train(scratch, f"hydra.run.dir='{RUN}'")
    return run_dir


def section_calc_eval(scratch: Path) -> dict:
    """python calc.py --eval examples/problems.txt on the default run (trained first when it is not there)."""
    run_dir = default_run(scratch)
    command = [sys.executable, "calc.py", "--ckpt", str(run_dir), "--eval", "examples/problems.txt"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=os.environ | {"COLUMNS": "120"})
    return {
        "command": "python calc.py --eval examples/problems.txt",
        "exit": done.returncode,
        "stdout": done.stdout.strip().replace(str(run_dir), RUN),
    }


def section_decode(scratch: Path) -> dict:
    """python bench.py decode on the default run (trained first when it is not there): evaluation and decoding speed."""
    run_dir = default_run(scratch)
    found = bench(scratch, "decode", "--ckpt", str(run_dir))["decode"]
    return {"command": f"python bench.py decode --ckpt {RUN}"} | found


# calc.py --export's summary line (model/export.py: export_command), read back for the prose
EXPORT_CHECK = re.compile(
    r"checked on (?P<n>[\d,]+) problems: max \|logit diff\| (?P<diff>\S+), greedy answers agree on (?P<agree>[\d,]+),"
)


def section_export(scratch: Path) -> dict:
    """python calc.py --export hf on the default run (trained first when it is not there; needs ``.[interop]``):
    the summary line, and the export check's figures read back from it."""
    run_dir = default_run(scratch)
    out_dir = scratch / "hf_calculator"
    line = run(["calc.py", "--ckpt", str(run_dir), "--export", "hf", str(out_dir)], ROOT, merged=False).stdout.strip()
    check = EXPORT_CHECK.search(line)
    if check is None:
        sys.exit(f"export: the summary line no longer reads as EXPORT_CHECK expects: {line}")
    return {
        "command": "python calc.py --export hf hf_calculator",
        "line": line.replace(str(out_dir), "hf_calculator"),
        "max_logit_diff": float(check["diff"]),
        "answers_agree": int(check["agree"].replace(",", "")),
        "n": int(check["n"].replace(",", "")),
    }


def section_seeds(scratch: Path) -> dict:
    """python train.py -m seed=1,2,3,4: how many steps other seeds need."""
    train(scratch, "-m", "seed=1,2,3,4", "hydra.sweep.dir=multirun/seeds")
    rows = []
    for job in finished_jobs(scratch / "multirun/seeds"):
        r = results(job)
        rows.append({k: r[k] for k in ("seed", "steps", "train_seconds", "total_seconds", "test_exact_match")})
    return {"command": "python train.py -m seed=1,2,3,4", "runs": sorted(rows, key=lambda r: r["seed"])}


def sweep_rows(sweep: Path) -> list[dict]:
    from analysis.sweep import summarise
    from storage.rundir import SweepDir

    return [
        {
            k: row[k]
            for k in (
                "n_heads",
                "head_dim",
                "seed",
                "steps_to_99",
                "test_exact_match",
                "train_seconds",
                "prunable_fraction",
                "learned",
                "status",
            )
        }
        for row in summarise(SweepDir(sweep))
    ]


def section_quick_sweep(scratch: Path) -> dict:
    """python train.py -m experiment=quick_sweep: 1, 2, 4, 8 heads, each trained until it learns."""
    ran = train(scratch, "-m", "experiment=quick_sweep", "hydra.sweep.dir=multirun/quick")
    sweep = scratch / "multirun/quick"
    images: dict[str, str] = {}
    image(images, sweep / "sweep_summary.png", "quick_sweep.png")
    if screenshot(sweep / "sweep_report.html", IMAGES / "sweep_report.png", 1400, scratch):
        images["sweep_report.png"] = code_hash(DRAWN_BY["sweep_report.png"])
    runs = [results(job) for job in finished_jobs(sweep)]
    return {
        "command": "python train.py -m experiment=quick_sweep",
        "whole_seconds": ran.seconds,
        "rows": sweep_rows(sweep),
        "steps": {str(r["n_heads"]): r["steps"] for r in runs},
        "images": images,
    }


def section_head_sweep(scratch: Path) -> dict:
    """python train.py -m experiment=head_sweep seed=0,1: 1-16 heads, 1,500 steps each, two seeds."""
    ran = train(scratch, "-m", "experiment=head_sweep", "seed=0,1", "hydra.sweep.dir=multirun/heads")
    sweep = scratch / "multirun/heads"
    images: dict[str, str] = {}
    image(images, sweep / "sweep_summary.png", "head_sweep.png")
    return {
        "command": "python train.py -m experiment=head_sweep seed=0,1",
        "whole_seconds": ran.seconds,
        "rows": sweep_rows(sweep),
        "images": images,
    }


def section_why_multi_head(scratch: Path) -> dict:
    """python train.py -m experiment=why_multi_head: 1 head x 64 dims against 4 x 16."""
    ran = train(scratch, "-m", "experiment=why_multi_head", "hydra.sweep.dir=multirun/why")
    images: dict[str, str] = {}
    image(images, scratch / "multirun/why/why_multi_head.png", "why_multi_head.png")
    verdict = ran.stdout[ran.stdout.index("why multiple heads?") :].splitlines()[1:]
    verdict = [line.strip() for line in verdict if line.strip() and not line.strip().startswith("figure:")]
    return {"command": "python train.py -m experiment=why_multi_head", "verdict": verdict, "images": images}


def section_patching(scratch: Path) -> dict:
    """python docs/patching.py on the default run (trains it first when --only leaves the default section out)."""
    run_dir = default_run(scratch)
    facts_file = scratch / "patching.json"
    run([str(ROOT / "docs/patching.py"), "--ckpt", str(run_dir), "--json", str(facts_file)], scratch)
    images: dict[str, str] = {}
    image(images, run_dir / "lens_patching.png", "patching.png")
    r = results(run_dir)
    return json.loads(facts_file.read_text()) | {
        "run": {"steps": r["steps"], "test_exact_match": r["test_exact_match"], "seed": 0},
        "images": images,
    }


def circuits_of(scratch: Path, run_dir: Path) -> dict:
    """python analyse.py RUN: the run's circuits per digit, the roles they give, attribution against exact patching,
    and the seconds of its analysis and of the whole analyse.py command (``analyse_seconds``)."""
    ran = run([str(ROOT / "analyse.py"), str(run_dir)], scratch)
    r = results(run_dir)
    keep = ("circuits", "circuit_roles", "attribution_correlation_heads", "attribution_correlation_edges")
    keep += ("n_heads", "analysis_seconds")
    return {key: r[key] for key in keep} | {"analyse_seconds": ran.seconds}


def section_circuits(scratch: Path) -> dict:
    """python analyse.py on the default run: its circuits per digit, the roles they give, attribution vs exact."""
    run_dir = default_run(scratch)
    found = circuits_of(scratch, run_dir)
    r = results(run_dir)
    images: dict[str, str] = {}
    image(images, run_dir / "circuit.png", "circuit.png")
    return {
        "command": f"python analyse.py {RUN}",
        "run": {"steps": r["steps"], "test_exact_match": r["test_exact_match"], "seed": 0},
        **found,
        "images": images,
    }


CIRCUIT_TASKS = [  # docs/circuits.md beyond the default run: (label, overrides, seeds)
    ("sub3", ("experiment=sub3", "analysis=none", "logger=none"), (0,)),
    ("mul2", ("experiment=mul2", "analysis=none", "logger=none"), (0,)),
]


def section_circuits_tasks(scratch: Path) -> dict:
    """experiment=sub3 and mul2 on seed 0 (two at a time, one thread each), then python analyse.py on each: their
    circuits per digit and the roles they give."""
    runs = run_variants(scratch, "circuits_tasks", CIRCUIT_TASKS, lambda out, r: circuits_of(scratch, out))
    return {"command": "python train.py experiment=<name> seed=0 threads=1; python analyse.py <run>", "runs": runs}


LENGTH_WIDTHS = (1, 5, 10, 11, 12, 15, 20, 25, 30, 35, 40)  # the widths the docs' table shows


def scheme_name(model) -> str:
    """A length run's position scheme, named from its model config as the docs name it."""
    if not model.place_embedding:
        return "absolute"
    name = {"own": "abacus"}.get(model.place_of, "coupling")
    name += (" + place window" if model.get("place_window") else " + place scores") if model.get("place_bias") else ""
    return name + (f" + {model.random_places:.0%} randomised places" if model.get("random_places") else "")


LENGTH_RUNS = [  # (label, overrides, seeds): the experiments on seeds 0-2, the other position schemes on seed 0
    ("+", ("experiment=add_length",), (0, 1, 2)),
    ("-", ("experiment=sub_length",), (0, 1, 2)),
    *(("+", ("experiment=add_length", f"position={p}"), (0,)) for p in ("relative", "coupling", "abacus", "absolute")),
]


def section_length(scratch: Path) -> dict:
    """experiment=add_length and experiment=sub_length on seeds 0, 1, 2, and place scores without the window,
    coupling alone, abacus and absolute positions on seed 0: exact-match by operand length, the figure, and
    python verify.py on every addition run."""
    from omegaconf import OmegaConf

    def scheme_and_verdict(out: Path, r: dict) -> dict:
        position = scheme_name(OmegaConf.load(out / "config.yaml").model)
        return {"position": position, "verify": verify(out, scratch) if "+" in r["length_exact_match"] else None}

    runs = run_variants(scratch, "length", LENGTH_RUNS, scheme_and_verdict)
    return {"command": "python train.py experiment=add_length seed=S threads=1 (and experiment=sub_length)",
            "runs": runs, "images": draw_length(runs, scratch)}  # fmt: skip


def draw_length(runs: list[dict], scratch: Path) -> dict[str, str]:
    """docs/images/length.png from the length section's runs (their curves are in docs/measured/length.json)."""
    from analysis.length_figure import length_curves
    from analysis.record import save_figure

    curves = {
        f"{r['position']}{'' if op == '+' else ', subtraction'}, seed {r['seed']}": {int(w): x for w, x in c.items()}
        for r in runs for op, c in r["length"].items()
    }  # fmt: skip
    figure = scratch / "length.png"
    save_figure(length_curves(curves, 10), figure)
    images: dict[str, str] = {}
    image(images, figure, "length.png")
    return images


def verify(run_dir: Path, scratch: Path) -> dict:
    """``python verify.py RUN --json`` (exit 1, a failed verification, is a result too): its verdict and suites."""
    verified = run([str(ROOT / "verify.py"), str(run_dir), "--json"], scratch, ok=(0, 1), merged=False)
    return next(iter(json.loads(verified.stdout).values()))


def run_variants(
    scratch: Path, name: str, variants: list[tuple[str, tuple[str, ...], tuple[int, ...]]], extra=None
) -> list[dict]:
    """Each (label, overrides, seeds) variant on each of its seeds: ``python train.py <overrides> seed=S threads=1``,
    two whole commands at a time, in the order listed. Per run: steps, training seconds, test exact-match, the
    validation history (steps to 99% and to 100%, the best), where the run measured it exact-match by length, and
    what ``extra(run_dir, results)`` adds."""
    from concurrent.futures import ThreadPoolExecutor

    from analysis.sweep import steps_to

    jobs = [(label, overrides, seed) for label, overrides, seeds in variants for seed in seeds]

    def one(n: int) -> dict:
        label, overrides, seed = jobs[n]
        out = scratch / name / f"{n}_seed{seed}"
        ran = train(scratch, *overrides, f"seed={seed}", "threads=1", f"hydra.run.dir={out}")
        r, val = results(out), json.loads((out / "history.json").read_text())["val"]
        best = max(val, key=lambda h: h["exact_match"])
        return {
            "variant": label, "command": " ".join(["python train.py", *overrides]), "seed": seed,
            "steps": r["steps"], "train_seconds": r["train_seconds"], "whole_seconds": ran.seconds,
            "test_exact_match": r["test_exact_match"], "steps_to_99": steps_to(val, 0.99),
            "steps_to_100": steps_to(val, 1.0),
            "best_val": best["exact_match"], "best_val_step": best["step"], "length": r.get("length_exact_match") or {},
        } | (extra(out, r) if extra else {})  # fmt: skip

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(len(jobs))))


ORDER_RECIPE = ("optim=adamw", "trainer.val_check_interval=100", "analysis=none", "logger=none")
ANSWER_ORDER = [  # the README's "Why reversed": (label, overrides, seeds)
    ("3 digits | reversed (default)", ORDER_RECIPE, (0, 1, 2)),
    ("3 digits | plain", (*ORDER_RECIPE, "experiment=plain_answer"), (0, 1, 2)),
    ("5 digits, 2,000 steps | reversed (default)", (*ORDER_RECIPE, "data.digits=5", "trainer.max_steps=2000",
     "target_accuracy=null"), (0,)),
    ("5 digits, 2,000 steps | plain", (*ORDER_RECIPE, "experiment=plain_answer", "data.digits=5",
     "trainer.max_steps=2000", "target_accuracy=null"), (0,)),
]  # fmt: skip


def section_answer_order(scratch: Path) -> dict:
    """The answer reversed against written plainly, 3 digits on seeds 0-2 and 5 digits on seed 0 (AdamW recipe,
    validation every 100 steps): steps to 99% and 100% validation exact-match, test exact-match."""
    return {"command": "python train.py [experiment=plain_answer] seed=S " + " ".join(ORDER_RECIPE),
            "runs": run_variants(scratch, "answer_order", ANSWER_ORDER)}  # fmt: skip


LENGTH_OPTIONS = [  # docs/arithmetic.md's "what made the difference": (label, overrides, seeds), all seed 0
    ("place window of 2 places (`model.place_bias=2`)", ("experiment=add_length", "model.place_bias=2"), (0,)),
    ("stopped at the first perfect validation (`target_accuracy=0.9999`)",
     ("experiment=add_length", "target_accuracy=0.9999"), (0,)),
]  # fmt: skip


def section_length_options(scratch: Path) -> dict:
    """experiment=add_length's options one at a time, seed 0: exact-match by length for each."""
    return {"command": "python train.py experiment=add_length seed=0 threads=1 <option>",
            "runs": run_variants(scratch, "length_options", LENGTH_OPTIONS)}  # fmt: skip


ADD10_TASK = "10-digit `+` (8 heads of 8 dims; operands of every length, round numbers)"


def verified(scratch: Path) -> Callable[[Path, dict], dict]:
    """run_variants' ``extra`` for runs that are verified: verify.py's verdict, and the test set's size."""
    return lambda out, r: {"verify": verify(out, scratch), "n_test": r["n_test"]}


def section_add10(scratch: Path) -> dict:
    """experiment=add10 on seeds 0-4 (two whole commands at a time, one thread each), and python verify.py on
    every run: the Arithmetic table's first row and the verification verdicts."""
    runs = run_variants(scratch, "add10", [("add10", ("experiment=add10",), (0, 1, 2, 3, 4))], verified(scratch))
    return {"command": "python train.py experiment=add10 seed=S threads=1; python verify.py <run>", "runs": runs}


ADD10_RECIPE = [  # docs/arithmetic.md: add10 with one part of its recipe taken out (label, overrides, seeds)
    ("4 heads of 16 dims (`model.n_heads=4`)", ("model.n_heads=4",), (0, 1, 2)),
    ("no hard cases (`data.hard_share=0`)", ("data.hard_share=0",), (0, 1, 2)),
    ("uniform 10-digit operands (`data.mixed_lengths=0 data.round_numbers=0`)",
     ("data.mixed_lengths=0", "data.round_numbers=0"), (0, 1, 2)),
]  # fmt: skip
QUIET_RUN = ("analysis=none", "logger=none")  # runs measured for their steps and scores only


def section_add10_recipe(scratch: Path) -> dict:
    """experiment=add10 with one part of its recipe taken out at a time, seeds 0-2 (two at a time, one thread
    each), and python verify.py on every run: what each part is for."""
    variants = [(label, ("experiment=add10", *o, *QUIET_RUN), seeds) for label, o, seeds in ADD10_RECIPE]
    runs = run_variants(scratch, "add10_recipe", variants, verified(scratch))
    command = f"python train.py experiment=add10 <change> seed=S threads=1 {' '.join(QUIET_RUN)}"
    return {"command": command + "; python verify.py <run>", "runs": runs}


ARITHMETIC = [  # the README's Arithmetic table after add10: (experiment, extra overrides, what the task is, seeds)
    ("mul3", (), "3-digit `*` (104,000 parameters)", (0, 1, 2)),
    ("mixed", (), "2-digit `+-*`, trained on 61% of the space", (0, 1, 2)),
    ("mixed", ("data.test_fraction=0.1",), "2-digit `+-*`, trained on 85%", (0, 1, 2)),
    ("sub3", (), "3-digit `-`, negative answers too", (0, 1, 2)),
    ("mul2", (), "2-digit `*`", (0, 1, 2)),
]


def whole_space(scratch: Path, job: Path, operators: str) -> dict:
    """python calc.py --eval on every problem of a 2-digit task's space (training problems included)."""
    ops = list(operators)
    value = {"+": operator.add, "-": operator.sub, "*": operator.mul}
    lines = [f"{a}{op}{b}={value[op](a, b)}" for op in ops for a in range(100) for b in range(100)]
    problems = scratch / f"space_{''.join(ops)}.txt"
    problems.write_text("\n".join(lines) + "\n")
    ran = run([str(ROOT / "calc.py"), "--ckpt", str(job), "--eval", str(problems), "--json"], scratch, (0, 1), False)
    report = json.loads(ran.stdout)
    return {"right": report["right"], "n": report["n_problems"]}


def section_arithmetic(scratch: Path) -> dict:
    """Every experiment of the Arithmetic table on its seeds, two whole train.py commands at a time, one thread
    each; the 2-digit tasks also over their whole problem space."""
    from concurrent.futures import ThreadPoolExecutor

    from omegaconf import OmegaConf

    jobs = [(i, seed) for i, (*_, seeds) in enumerate(ARITHMETIC) for seed in seeds]

    def one(job: tuple[int, int]) -> dict:
        i, seed = job
        experiment, overrides, _, _ = ARITHMETIC[i]
        out = scratch / "arithmetic" / f"{i}_{experiment}_{seed}"
        ran = train(
            scratch, f"experiment={experiment}", *overrides, f"seed={seed}", "threads=1", f"hydra.run.dir={out}"
        )
        r, config = results(out), OmegaConf.load(out / "config.yaml")
        capped = r["steps"] >= config.trainer.max_steps
        row = {"seed": seed, "steps": r["steps"], "capped": capped, "whole_seconds": ran.seconds}
        row |= {"test_exact_match": r["test_exact_match"], "n_test": r["n_test"]}
        if config.data.digits == 2:
            row["whole_space"] = whole_space(scratch, out, config.data.operators)
        return row

    with ThreadPoolExecutor(2) as pool:  # two runs sharing the machine, in the order listed (longest first)
        done = list(pool.map(one, jobs))
    rows = [
        {
            "experiment": e,
            "overrides": list(o),
            "task": task,
            "runs": [r for (i, _), r in zip(jobs, done, strict=True) if i == n],
        }
        for n, (e, o, task, _) in enumerate(ARITHMETIC)
    ]
    return {"command": "python train.py experiment=<name> seed=<s> threads=1, two at a time", "rows": rows}


PRODUCT_ALONE = ("experiment=mul2", "data.show_work=false")
MUL_WORKING = [  # docs/arithmetic.md "Before the working": (label, overrides, seeds), all seed 0
    ("`mul2` (with the working)", ("experiment=mul2",), (0,)),
    ("the product alone (`data.show_work=false`)", PRODUCT_ALONE, (0,)),
    ("the product alone, `optim.weight_decay=1.0` (grokking-style)", (*PRODUCT_ALONE, "optim.weight_decay=1.0"), (0,)),
    ("`mixed` trained on 85%, the answer alone",
     ("experiment=mixed", "data.test_fraction=0.1", "data.show_work=false"), (0,)),
]  # fmt: skip


def by_split(scratch: Path, job: Path) -> dict:
    """python calc.py --eval on a 2-digit run's trained problems and on its held-out ones (validation and test)
    apart, by operator; and of the held-out '*' problems it gets wrong, how many have their mirror b*a held out."""
    import torch
    from omegaconf import OmegaConf

    from data.problems import ProblemFormat

    data = OmegaConf.load(job / "config.yaml").data
    fmt = ProblemFormat(digits=2, operators=data.operators)
    a, b = (t.flatten() for t in torch.meshgrid(torch.arange(100), torch.arange(100), indexing="ij"))  # (10000,)
    held_out: set[str] = set()
    lines: dict[str, list[str]] = {"trained": [], "held_out": []}
    for i, op in enumerate(fmt.operators):
        split = fmt.split_of(a, torch.full_like(a, i), b, data.val_fraction, data.test_fraction)  # 0 trained
        for x, y, s in zip(a.tolist(), b.tolist(), split.tolist(), strict=True):
            text = f"{x}{op}{y}"
            lines["held_out" if s else "trained"].append(f"{text}={fmt.evaluate(x, op, y)}")
            if s:
                held_out.add(text)
    scores = {}
    for part, problems in lines.items():
        path = scratch / f"{job.name}_{part}.txt"
        path.write_text("\n".join(problems) + "\n")
        args = [str(ROOT / "calc.py"), "--ckpt", str(job), "--eval", str(path), "--json", "--show-mistakes", "100000"]
        report = json.loads(run(args, scratch, (0, 1), False).stdout)
        scores[part] = {"right": report["right"], "n": report["n_problems"]} | {
            "by_operator": {op: {"right": v["right"], "n": v["n"]} for op, v in report["by_operator"].items()}
        }
        if part == "held_out":
            wrong = [m["problem"] for m in report["mistakes"] if "*" in m["problem"]]
            mirrored = sum("*".join(reversed(m.split("*"))) in held_out for m in wrong)
            scores[part] |= {"wrong_products": len(wrong), "mirror_held_out": mirrored}
    return scores


def section_mul_working(scratch: Path) -> dict:
    """2-digit multiplication with and without the working written out (seed 0, two at a time, one thread each):
    each model's score on the problems it trained on and on the held-out ones."""
    runs = run_variants(scratch, "mul_working", MUL_WORKING, lambda out, r: {"by_split": by_split(scratch, out)})
    return {"command": "python train.py experiment=mul2 [data.show_work=false] seed=0 threads=1", "runs": runs}


RECIPES = [  # docs/performance.md's recipe search: (label, overrides); the first is the default recipe
    ("**default**: Muon 0.02 + AdamW 3e-3, warm-up 50, cosine to step 300", ""),
    ("the same, cosine to step 400", "optim.decay_steps=400"),
    ("Muon 0.03, cosine to 300", "optim.muon_lr=0.03"),
    ("AdamW 6e-3 beside Muon 0.02, cosine to 300", "optim.lr=6e-3"),
    ("AdamW alone, lr 1e-2, warm-up 30, cosine to 400",
     "optim=adamw optim.lr=1e-2 optim.warmup_steps=30 optim.decay_steps=400"),
]  # fmt: skip
RECIPE_SEEDS = "0,1,2,3,4"


def section_recipe_search(scratch: Path) -> dict:
    """python -m benchmarks.recipe_search (one thread, validation every 25 steps): steps to every validation problem
    right for the default recipe and its neighbours, seeds 0-4."""
    recipes = [f"threads=1 {overrides}".strip() for _, overrides in RECIPES]
    args = ["-m", "benchmarks.recipe_search", "--seeds", RECIPE_SEEDS, "--json", *recipes]
    found = json.loads(run(args, scratch, merged=False).stdout)
    for (label, _), row in zip(RECIPES, found, strict=True):
        row["label"] = label
    command = f'python -m benchmarks.recipe_search --seeds {RECIPE_SEEDS} "threads=1 <overrides>" ...'
    return {"command": command, "recipes": found}


def bench(scratch: Path, *args: str) -> dict:
    """``python bench.py ARGS --json``: its one JSON object."""
    return json.loads(run([str(ROOT / "bench.py"), *args, "--json"], scratch, merged=False).stdout)


TRAIN_ROUNDS = 5  # bench.py train --repeat: the variants take turns this many times, each figure a median


def section_performance(scratch: Path) -> dict:
    """python bench.py train (3 and 10 digits), python bench.py converge (seeds 0-4), and the quick sweep's whole
    command under the default recipe and under the AdamW one."""
    from benchmarks.converge import PREVIOUS_RECIPE

    keep = ("ms_per_step", "tokens_per_second", "mfu", "lightning_over_bare", "model_over_nanogpt")
    keep += ("matmul_peak_gflops", "matmul_share_of_step", "batch_size")
    train_speed = {}
    for digits in (3, 10):
        figures = bench(scratch, "train", "--digits", str(digits), "--repeat", str(TRAIN_ROUNDS))["train"]
        train_speed[str(digits)] = {key: figures[key] for key in keep} | {"rounds": TRAIN_ROUNDS}
    converge = bench(scratch, "converge")["converge"]
    sweeps = {}
    for recipe, overrides in (("default", ()), ("previous", PREVIOUS_RECIPE)):
        ran = train(scratch, "-m", "experiment=quick_sweep", *overrides, f"hydra.sweep.dir=multirun/speed_{recipe}")
        sweep = scratch / f"multirun/speed_{recipe}"
        jobs = [results(job) for job in finished_jobs(sweep)]
        sweeps[recipe] = {
            "command": " ".join(["python train.py -m experiment=quick_sweep", *overrides]),
            "whole_seconds": ran.seconds,
            "steps": {str(r["n_heads"]): r["steps"] for r in jobs},
            "test_exact_match": {str(r["n_heads"]): r["test_exact_match"] for r in jobs},
        }
    return {
        "command": "python bench.py train [--digits 10]; python bench.py converge; the quick sweep, both recipes",
        "train": train_speed,
        "converge": converge,
        "quick_sweep": sweeps,
    }


def section_bad_configs(scratch: Path) -> dict:
    """How many mistakes tests/test_bad_configs.py holds (read from the test, nothing trained)."""
    import ast

    tree = ast.parse((ROOT / "tests/test_bad_configs.py").read_text())
    found = {
        target.id: len(node.value.elts)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    return {"cases": found.get("BAD_CONFIGS", 0) + found.get("ABSENT_DEVICES", 0)}


@dataclass
class Section:
    name: str
    build: Callable[[Path], dict]
    cost: str  # rough wall time on a 2-core CPU
    extra: tuple[str, ...] = ()  # optional packages its commands import (model/optional.py), checked before any run


SECTIONS = [
    Section("default", section_default, "~1 min"),
    Section("bad_configs", section_bad_configs, "instant"),
    Section("calc_eval", section_calc_eval, "~5 s (+1 min without the default section)"),
    Section("decode", section_decode, "~15 s (+1 min without the default section)"),
    Section("export", section_export, "~20 s (+1 min without the default section)", ("transformers", "safetensors")),
    Section("patching", section_patching, "~30 s (+1 min without the default section)"),
    Section("circuits", section_circuits, "~30 s (+1 min without the default section)"),
    Section("quick_sweep", section_quick_sweep, "~4 min"),
    Section("why_multi_head", section_why_multi_head, "~2 min"),
    Section("seeds", section_seeds, "~3 min"),
    Section("head_sweep", section_head_sweep, "~10 min"),
    Section("length", section_length, "~25 min"),
    Section("length_options", section_length_options, "~6 min"),
    Section("answer_order", section_answer_order, "~6 min"),
    Section("add10", section_add10, "~15 min"),
    Section("add10_recipe", section_add10_recipe, "~35 min"),
    Section("mul_working", section_mul_working, "~12 min"),
    Section("circuits_tasks", section_circuits_tasks, "~5 min"),
    Section("recipe_search", section_recipe_search, "~12 min"),
    Section("arithmetic", section_arithmetic, "~40 min"),
    Section("performance", section_performance, "~15 min (on a quiet machine: it times)"),
]


# ---- the Markdown blocks --------------------------------------------------------------------------------
def load_measured() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(MEASURED.glob("*.json"))}


def pct(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}%}"


def secs(x: float) -> str:
    x = round(x)
    return f"{x} s" if x < 60 else f"{x // 60} min {x % 60} s"


def not_measured(section: str) -> str:
    return f"*Not measured yet: `python docs/regenerate.py --only {section}`.*"


def block_machine(m: dict) -> str:
    machine = m.get("machine")
    if not machine:
        return not_measured("default")
    lines = [
        f"Measured on {machine['machine']['cpu']} ({machine['machine']['cores']} cores, no GPU), "
        f"{machine['machine']['os']}, Python {machine['machine']['python']}, torch {machine['machine']['torch']}, "
        "by `python docs/regenerate.py` (each section's JSON is in [`docs/measured/`](docs/measured/)):",
        "",
        "| section | measured | at commit | load (start, end) | what it runs |",
        "|---|---|---|---|---|",
    ]
    for name, when in sorted(machine["sections"].items()):
        load = " / ".join(f"{x:.1f}" for x in when.get("load", [])) or "—"
        lines.append(f"| `{name}` | {when['date']} | {when['commit']} | {load} | {when['runs']} |")
    lines += [
        "",
        f"Load: the machine's 1-minute load average. Above {machine['machine']['cores']} (its cores), other work "
        "shared the cores, and the seconds measured then are upper bounds.",
    ]
    return "\n".join(lines)


def block_summary(m: dict) -> str:
    d = m.get("default")
    if not d:
        return not_measured("default")
    return f"```\n$ python train.py\n...\n{d['summary']}\n```"


def block_results(m: dict) -> str:
    d = m.get("default")
    if not d:
        return not_measured("default")
    lines = [
        "| command | params | steps | train s | whole command s | test exact-match |",
        "|---|---|---|---|---|---|",
        f"| `python train.py` (seed 0) | {d['n_params']:,} | {d['steps']:,} | {d['train_seconds']:.1f} | "
        f"{d['whole_seconds']:.1f} | {pct(d['test_exact_match'])} |",
    ]
    s = m.get("seeds")
    if s:
        runs = s["runs"]
        steps = " / ".join(f"{r['steps']:,}" for r in runs)
        train_s = " / ".join(f"{r['train_seconds']:.1f}" for r in runs)
        total_s = " / ".join(f"{r['total_seconds']:.0f}" for r in runs)
        exact = " / ".join(pct(r["test_exact_match"]) for r in runs)
        lines.append(
            f"| `{s['command']}` | {d['n_params']:,} | {steps} | {train_s} | {total_s} (in process) | {exact} |"
        )
    lines += [
        "",
        f"Peak memory of the default command {d['peak_gb']:.2f} GB; its test lists {d['test_mistakes']:,} "
        f"mistakes; its `report.html` is {d['report_kb']} KB.",
    ]
    return "\n".join(lines)


def block_ablation(m: dict) -> str:
    d = m.get("default")
    if not d:
        return not_measured("default")
    cost = ", ".join(f"{head} {points:+.1f}" for head, points in d["ablation_zero"].items())
    return (
        f"In the default run (seed 0, {d['steps']:,} steps, {pct(d['test_exact_match'])}), zeroing each head changes "
        f"exact-match by (points): {cost}."
    )


def block_dla(m: dict) -> str:
    d = m.get("default")
    if not d:
        return not_measured("default")
    top = ", ".join(f"{x['head']} {x['logits']:+.2f}" for x in d["dla"])
    return f"In the same run the largest direct effects, over all answer digits, are {top} logits."


def block_calc_eval(m: dict) -> str:
    c = m.get("calc_eval")
    if not c:
        return not_measured("calc_eval")
    return f"```\n$ {c['command']}   # exit status {c['exit']}\n{c['stdout']}\n```"


def block_decode(m: dict) -> str:
    x = m.get("decode")
    if not x:
        return not_measured("decode")
    cache, plain = x["decode"]["kv_cache"], x["decode"]["no_cache"]
    return (
        f"Evaluating {x['n']:,} random 3-digit additions end to end (parse, encode, batched greedy decoding with the "
        f"KV cache, scoring) takes **{x['eval_seconds']:.2f} s** on this machine; decoding runs at "
        f"{cache['tokens_per_second']:,} answer tokens/s with the KV cache against {plain['tokens_per_second']:,} "
        f"without it (×{x['kv_cache_speedup']:.1f}). Measured with `{x['command']}` (`--json` for the numbers; "
        "`python docs/regenerate.py --only decode`)."
    )


def block_export(m: dict) -> str:
    x = m.get("export")
    return not_measured("export") if not x else f"```\n{x['line']}\n```"


def block_export_check(m: dict) -> str:
    x = m.get("export")
    if not x:
        return not_measured("export")
    exact = x["max_logit_diff"] == 0 and x["answers_agree"] == x["n"]
    return (
        f"On the default run {'both numbers are exact' if exact else 'the check reads'}: max |logit diff| "
        f"**{x['max_logit_diff']:.1g}** and **{x['answers_agree']:,} / {x['n']:,}** answers equal"
    )


def block_bad_configs(m: dict) -> str:
    b = m.get("bad_configs")
    return "(not counted yet)" if not b else f"{b['cases']}"


def block_report_kb(m: dict) -> str:
    d = m.get("default")
    return "(not measured yet)" if not d else f"{d['report_kb']} KB"


def sweep_table(rows: list[dict], with_seed: bool) -> list[str]:
    by_heads: dict[int, list[dict]] = {}
    for row in rows:
        by_heads.setdefault(row["n_heads"], []).append(row)
    seeds = " / ".join(f"seed {r['seed']}" for r in by_heads[min(by_heads)]) if with_seed else ""
    reached = f"reached 99% val ({seeds})" if seeds else "reached 99% val"
    lines = [
        f"| n_heads | head_dim | {reached} | test exact-match | train s | prunable fraction |",
        "|---|---|---|---|---|---|",
    ]
    for n, group in sorted(by_heads.items()):
        group = sorted(group, key=lambda r: r["seed"] or 0)
        reached = " / ".join(f"step {r['steps_to_99']:,}" if r["steps_to_99"] else "never" for r in group)
        exact = " / ".join(pct(r["test_exact_match"]) for r in group)
        seconds = " / ".join(f"{r['train_seconds']:.0f}" for r in group)
        prunable = " / ".join(f"{r['prunable_fraction']:.2g}" if r["learned"] else "not learned" for r in group)
        lines.append(f"| {n} | {group[0]['head_dim']} | {reached} | {exact} | {seconds} | {prunable} |")
    return lines


def block_arithmetic(m: dict) -> str:
    a = m.get("arithmetic")
    if not a:
        return not_measured("arithmetic")
    lines = ["| experiment | task | seed | steps | whole command | test exact-match |", "|---|---|---|---|---|---|"]
    add10 = m.get("add10")
    rows = [{"experiment": "add10", "overrides": [], "task": ADD10_TASK, "runs": add10["runs"]}] if add10 else []
    for row in rows + [row for row in a["rows"] if row["experiment"] != "add10" or not add10]:
        runs = row["runs"]
        name = " ".join([f"`{row['experiment']}", *row["overrides"]]) + "`"
        seeds = " / ".join(str(r["seed"]) for r in runs)
        steps = " / ".join(f"{r['steps']:,}" + (" (the cap)" if r.get("capped") else "") for r in runs)
        seconds = " / ".join(secs(r["whole_seconds"]) for r in runs)
        exact = [pct(r["test_exact_match"]) for r in runs]
        sizes = {r["n_test"] for r in runs}
        every = len(set(exact)) == 1
        score = f"**{exact[0] if every else ' / '.join(exact)}**" + (f" of {sizes.pop():,}" if len(sizes) == 1 else "")
        score += " on every seed" if every else ""
        spaces = [r["whole_space"] for r in runs if "whole_space" in r]
        if spaces:
            right = " / ".join(f"{space['right']:,}" for space in spaces)
            score += f" (whole space: {right} of {spaces[0]['n']:,})"
        lines.append(f"| {name} | {row['task']} | {seeds} | {steps} | {seconds} | {score} |")
    return "\n".join(lines)


def reached(r: dict, key: str) -> str:
    """A run's step at 99% or 100% validation, or "never (best x%)"."""
    step = r[key]
    return f"{step:,}" if step is not None else f"never (best {pct(r['best_val'])}, at {r['best_val_step']:,})"


def block_answer_order(m: dict) -> str:
    x = m.get("answer_order")
    if not x:
        return not_measured("answer_order")
    lines = [
        "| task | answer written | seed | steps to 99% val | steps to 100% val | test exact-match |",
        "|---|---|---|---|---|---|",
    ]
    groups: dict[str, list[dict]] = {}
    for r in x["runs"]:
        groups.setdefault(r["variant"], []).append(r)
    for label, runs in groups.items():
        task, answer = label.split(" | ")
        cells = [" / ".join(f(r) for r in runs) for f in (
            lambda r: str(r["seed"]), lambda r: reached(r, "steps_to_99"), lambda r: reached(r, "steps_to_100"),
            lambda r: pct(r["test_exact_match"]))]  # fmt: skip
        lines.append(f"| {task} | {answer} | " + " | ".join(cells) + " |")
    pairs = [
        (r, p) for r in x["runs"] for p in x["runs"]
        if "reversed" in r["variant"] and p["variant"] == r["variant"].replace("reversed (default)", "plain")
        and p["seed"] == r["seed"]
    ]  # fmt: skip
    at = lambda r: r["steps_to_100"] if r["steps_to_100"] is not None else float("inf")  # noqa: E731
    sooner = sum(at(r) <= at(p) for r, p in pairs)
    never = [sum(run["steps_to_100"] is None for run in side) for side in zip(*pairs, strict=True)] or [0, 0]
    lines += ["", f"Reversed reached 100% validation as soon as or sooner than plain in {sooner} of {len(pairs)} "
              f"pairs; runs that never reached it: {never[0]} reversed, {never[1]} plain."]  # fmt: skip
    return "\n".join(lines)


LENGTH_OPTION_WIDTHS = (10, 12, 15, 20, 25, 30, 40)


def block_length_options(m: dict) -> str:
    x = m.get("length_options")
    if not x:
        return not_measured("length_options")
    head = " | ".join(f"{w} digits" for w in LENGTH_OPTION_WIDTHS)
    lines = [f"| variant | steps | training | {head} |", "|---|---|---|" + "---|" * len(LENGTH_OPTION_WIDTHS)]
    for r in x["runs"]:
        curve = r["length"].get("+", {})
        cells = " | ".join(pct(curve.get(str(w)), 1) for w in LENGTH_OPTION_WIDTHS)
        lines.append(f"| {r['variant']} | {r['steps']:,} | {secs(r['train_seconds'])} | {cells} |")
    return "\n".join(lines)


def block_quick_sweep(m: dict) -> str:
    q = m.get("quick_sweep")
    if not q:
        return not_measured("quick_sweep")
    return "\n".join(
        [
            f"`{q['command']}` took {secs(q['whole_seconds'])} (the whole command); each run stopped once every "
            "validation problem was right:",
            "",
            *sweep_table(q["rows"], with_seed=False),
            "",
            "![the quick sweep: learning curves and final accuracy](docs/images/quick_sweep.png)",
            "",
            "![the quick sweep's page, sweep_report.html](docs/images/sweep_report.png)",
        ]
    )


def block_head_sweep(m: dict) -> str:
    h = m.get("head_sweep")
    if not h:
        return not_measured("head_sweep")
    return "\n".join(
        [
            f"`{h['command']}` (1,500 steps each, no early stop):",
            "",
            *sweep_table(h["rows"], True),
            "",
            "![head sweep: learning curves and final accuracy](docs/images/head_sweep.png)",
        ]
    )


def block_why_multi_head(m: dict) -> str:
    w = m.get("why_multi_head")
    if not w:
        return not_measured("why_multi_head")
    lines = [f"- {line}" for line in w["verdict"]]
    return "\n".join([*lines, "", "![why multiple heads](docs/images/why_multi_head.png)"])


def block_why_multi_head_verdict(m: dict) -> str:
    """docs/course.md: the comparison's verdict, without the figure and the sweep's own files."""
    w = m.get("why_multi_head")
    if not w:
        return not_measured("why_multi_head")
    return "\n".join(f"- {line}" for line in w["verdict"] if not line.startswith("sweep "))


def block_patching(m: dict) -> str:
    p, d = m.get("patching"), m.get("default")
    if not p:
        return not_measured("patching")
    reads = " and ".join(f"`{x}`" for x in p["top_head_reads"]) or "no single position"
    text = (
        f"In the run behind the figure (the default run: seed 0, {p['run']['steps']:,} steps, "
        f"{pct(p['run']['test_exact_match'])} of held-out problems), the single head output that restores most of "
        f"the carry into answer digit r{p['place']} is {p['top_head']} at the last position "
        f"({p['top_head_restores']:.0%} of the clean answer's logit difference), attending to {reads}."
    )
    if d and p["top_head"] in d["ablation_zero"]:
        text += f" Zeroing {p['top_head']} costs {-d['ablation_zero'][p['top_head']]:.1f} points of exact-match."
    return text + " Strongest patches: " + "; ".join(p["strongest"]) + "."


def circuit_table(circuits: dict) -> list[str]:
    lines = [
        "| digit | circuit edges | of all edges | head → head edges | recovers | random sets of that size |",
        "|---|---|---|---|---|---|",
    ]
    for digit, x in circuits.items():
        lines.append(
            f"| {digit} | {x['edges']} | {x['fraction']:.0%} | {x['head_to_head']} of {x['head_to_head_total']} | "
            f"{x['faithfulness']:.0%} | {pct(x['random_mean'], 1).replace('-0.0%', '0.0%')} ± {x['random_std']:.1%} |"
        )
    return lines


def circuit_roles(c: dict) -> str:
    return "; ".join(f"{head} *{role}*" for head, role in c["circuit_roles"].items() if role)


def block_circuits(m: dict) -> str:
    c = m.get("circuits")
    if not c:
        return not_measured("circuits")
    lines = [
        f"The default run (seed 0, {c['run']['steps']:,} steps, {pct(c['run']['test_exact_match'])}), "
        f"`{c['command']}`:",
        "",
        *circuit_table(c["circuits"]),
        "",
        f"Attribution patching (integrated gradients, 8 steps) against exact patching, Pearson r: heads "
        f"{c['attribution_correlation_heads']:.2f}, edges {c['attribution_correlation_edges']:.2f}. "
        f"Roles from the circuits: {circuit_roles(c)}; the other heads are in no circuit. The whole analysis took "
        f"{c['analysis_seconds']:.0f} s ({secs(c['analyse_seconds'])} for the command).",
    ]
    return "\n".join(lines)


def block_circuits_tasks(m: dict) -> str:
    """The circuits of sub3 and mul2 (seed 0), a table and the roles each."""
    x = m.get("circuits_tasks")
    if not x:
        return not_measured("circuits_tasks")
    lines: list[str] = []
    for r in x["runs"]:
        lines += [
            f"**`python train.py experiment={r['variant']}`** (seed 0, {r['n_heads']} heads per layer, "
            f"{r['steps']:,} steps, {pct(r['test_exact_match'])} of the test set):",
            "",
            *circuit_table(r["circuits"]),
            "",
            f"Attribution against exact patching, Pearson r: heads {r['attribution_correlation_heads']:.2f}, edges "
            f"{r['attribution_correlation_edges']:.2f}. Roles from the circuits: {circuit_roles(r)}; the other heads "
            "are in no circuit.",
            "",
        ]
    return "\n".join(lines[:-1])


def block_length(m: dict) -> str:
    x = m.get("length")
    if not x:
        return not_measured("length")
    lines = [
        "| task | position | seed | steps | training | " + " | ".join(f"{w} digits" for w in LENGTH_WIDTHS)
        + " | verify.py |",
        "|---|---|---|---|---|" + "---|" * len(LENGTH_WIDTHS) + "---|",
    ]  # fmt: skip
    for r in x["runs"]:
        (op, curve), v = next(iter(r["length"].items())), r["verify"]
        cells = " | ".join(pct(curve.get(str(w)), 1) for w in LENGTH_WIDTHS)
        failed = [name for name, suite in v["suites"].items() if not suite["passed"]] if v else []
        verdict = "pass" if v and v["passed"] else "fails " + ", ".join(failed) if v else "—"
        task = {"+": "`+`", "-": "`-`, larger first"}[op]
        lines.append(
            f"| {task} | {r['position']} | {r['seed']} | {r['steps']:,} | {secs(r['train_seconds'])} | {cells} "
            f"| {verdict} |"
        )
    return "\n".join([*lines, "", "![exact-match by operand length](images/length.png)"])


@dataclass
class Verified:
    """verify.py's verdict on one run, as the tables show it."""

    pairs: str  # the random pairs' exact-match
    edges: str  # edge cases right, of all
    verdict: str  # pass, or the first edge cases it fails

    @classmethod
    def of(cls, v: dict, named: int = 5) -> Verified:
        pairs = v["suites"]["random pairs"]
        edges = [suite for name, suite in v["suites"].items() if name != "random pairs"]
        right, n = sum(e["right"] for e in edges), sum(e["n"] for e in edges)
        failures = ", ".join(f"`{p}`" for p in sorted({f["problem"] for e in edges for f in e["failures"]})[:named])
        verdict = "pass" if v["passed"] else f"fails {failures}" if failures else "fails the random pairs"
        return cls(pct(rate(pairs)), f"{right:,} / {n:,}", verdict)


def block_add10_verify(m: dict) -> str:
    """The verification verdict of each add10 run, with the problems a failing one gets wrong."""
    x = m.get("add10")
    if not x:
        return not_measured("add10")
    lines = ["| seed | steps | random pairs | edge cases | verdict |", "|---|---|---|---|---|"]
    for r in x["runs"]:
        v = Verified.of(r["verify"])
        lines.append(f"| {r['seed']} | {r['steps']:,} | {v.pairs} | {v.edges} | {v.verdict} |")
    return "\n".join(lines)


AS_CONFIGURED = "`experiment=add10` as configured"


def add10_recipe_groups(m: dict) -> dict[str, list[dict]]:
    """add10 as configured (the add10 section's runs on the recipe section's seeds), then each part of its recipe
    taken out: {label: runs}, in that order; {} when either section is not measured."""
    x, whole = m.get("add10_recipe"), m.get("add10")
    if not x or not whole:
        return {}
    seeds = {r["seed"] for r in x["runs"]}
    groups = {AS_CONFIGURED: [r for r in whole["runs"] if r["seed"] in seeds]}
    for r in x["runs"]:
        groups.setdefault(r["variant"], []).append(r)
    return groups


def block_add10_recipe(m: dict) -> str:
    """add10 as configured (its seeds 0-2) against each part of its recipe taken out, seed by seed."""
    groups = add10_recipe_groups(m)
    if not groups:
        return not_measured("add10_recipe" if not m.get("add10_recipe") else "add10")
    lines = [
        "| recipe | seed | steps to 100% val | test exact-match | random pairs | edge cases | verify.py |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, runs in groups.items():
        for r in runs:
            v = Verified.of(r["verify"], named=3)
            lines.append(
                f"| {label} | {r['seed']} | {reached(r, 'steps_to_100')} | {pct(r['test_exact_match'])} | "
                f"{v.pairs} | {v.edges} | {v.verdict} |"
            )
    return "\n".join(lines)


def rate(score: dict) -> float:
    """A {right, n} score (calc.py --eval's, verify.py's) as a share."""
    return score["right"] / score["n"]


def right_of(score: dict) -> str:
    return f"{score['right']:,} / {score['n']:,} ({pct(rate(score), 1)})"


def block_mul_working(m: dict) -> str:
    """2-digit multiplication with and without the working: trained against held-out problems right."""
    x = m.get("mul_working")
    if not x:
        return not_measured("mul_working")
    lines = [
        "| model (seed 0) | steps | test exact-match | trained problems right | held-out problems right |",
        "|---|---|---|---|---|",
    ]
    for r in x["runs"]:
        split = r["by_split"]
        lines.append(
            f"| {r['variant']} | {r['steps']:,} | {pct(r['test_exact_match'])} | {right_of(split['trained'])} | "
            f"{right_of(split['held_out'])} |"
        )
    notes = []
    alone = x["runs"][1]["by_split"]["held_out"]  # MUL_WORKING's second row: the product alone
    if alone["wrong_products"]:
        notes.append(
            f"Of the {alone['wrong_products']:,} held-out products the product-alone model gets wrong, "
            f"{alone['mirror_held_out']:,} have their mirror `b*a` held out too."
        )
    for r in x["runs"]:
        held = r["by_split"]["held_out"]
        if len(held["by_operator"]) > 1:
            ops = ", ".join(f"`{op}` {pct(rate(s), 1)}" for op, s in held["by_operator"].items())
            notes.append(f"{r['variant']}, held-out problems by operator: {ops}.")
    return "\n".join([*lines, *(["", " ".join(notes)] if notes else [])])


def block_mul_summary(m: dict) -> str:
    """One clause for the README: mul2 with and without the working, trained against held-out problems."""
    x = m.get("mul_working")
    if not x:
        return not_measured("mul_working")
    with_work, alone = x["runs"][0]["by_split"], x["runs"][1]["by_split"]  # MUL_WORKING's first two rows
    memorised = " — it memorises" if rate(alone["trained"]) - rate(alone["held_out"]) > 0.02 else ""
    return (
        f"asked for the product directly, `mul2` (seed 0) gets {pct(rate(alone['trained']), 1)} of the problems it "
        f"trained on right and {pct(rate(alone['held_out']), 1)} of the held-out ones{memorised}; with the working "
        f"{pct(rate(with_work['trained']), 1)} and {pct(rate(with_work['held_out']), 1)}"
    )


def block_add10_recipe_summary(m: dict) -> str:
    """One sentence for the README: add10 with each part of its recipe taken out, seeds 0-2."""
    groups = add10_recipe_groups(m)
    if not groups:
        return not_measured("add10_recipe" if not m.get("add10_recipe") else "add10")
    parts = []
    for label, runs in groups.items():
        name = "as configured" if label == AS_CONFIGURED else label.split(" (")[0]  # the label without its command
        steps = " / ".join(reached(r, "steps_to_100") for r in runs)
        passed = sum(r["verify"]["passed"] for r in runs)
        parts.append(f"{name}: steps to 100% validation {steps}, verify.py passed by {passed} of {len(runs)}")
    seeds = " / ".join(str(r["seed"]) for r in groups[AS_CONFIGURED])
    return f"seeds {seeds}, " + "; ".join(parts)


def block_recipe_search(m: dict) -> str:
    """Steps to every validation problem right per seed, for the default recipe and its neighbours."""
    x = m.get("recipe_search")
    if not x:
        return not_measured("recipe_search")
    seeds = [r["seed"] for r in x["recipes"][0]["runs"]]
    lines = [
        "| recipe | " + " | ".join(f"seed {s}" for s in seeds) + " | worst | lowest test exact-match |",
        "|---|" + "---|" * len(seeds) + "---|---|",
    ]
    for row in x["recipes"]:
        steps = " | ".join(f"{r['steps']:,}" if r["steps"] is not None else "missed" for r in row["runs"])
        worst = f"{row['max_steps']:,}" if row["max_steps"] is not None else "—"
        lines.append(f"| {row['label']} | {steps} | {worst} | {pct(row['min_test_exact_match'])} |")
    return "\n".join(lines)


def block_add10_verdict(m: dict) -> str:
    """One sentence for the README: which add10 seeds pass verify.py, and what the others get wrong."""
    x = m.get("add10")
    if not x:
        return not_measured("add10")
    runs = x["runs"]
    passed = [str(r["seed"]) for r in runs if r["verify"]["passed"]]
    failed = [r for r in runs if not r["verify"]["passed"]]
    if not failed:
        return f"every seed passes, every random pair and every edge case right on all {len(runs)}"
    named = "; ".join(
        f"seed {r['seed']} fails "
        + ", ".join(f"`{f['problem']}`" for suite in r["verify"]["suites"].values() for f in suite["failures"][:3])
        for r in failed
    )
    return f"seeds {', '.join(passed) or 'none'} pass; {named}"


def block_length_summary(m: dict) -> str:
    """One sentence for the README: the experiments' exact-match at 20 and 30 digits, seed by seed."""
    x = m.get("length")
    if not x:
        return not_measured("length")
    parts = []
    for op, name in (("+", "addition"), ("-", "subtraction")):
        runs = [r for r in x["runs"] if r["position"] == "coupling + place window" and op in r["length"]]
        at = {w: " / ".join(pct(r["length"][op].get(str(w)), 1) for r in runs) for w in (20, 30, 40)}
        seeds = " / ".join(str(r["seed"]) for r in runs)
        parts.append(f"{name} (seeds {seeds}) {at[20]} at 20 digits, {at[30]} at 30 and {at[40]} at 40")
    return "; ".join(parts) + "."


def block_performance(m: dict) -> str:
    x = m.get("performance")
    if not x:
        return not_measured("performance")
    rows = [
        ("3-digit addition (default)", "3", "[Results](#results)", "`python bench.py train`; `python train.py`"),
        (
            "10-digit addition (`add10`)", "10", "every seed: [Arithmetic](#arithmetic)",
            "`python bench.py train --digits 10`; `python train.py experiment=add10`",
        ),
    ]  # fmt: skip
    lines = [
        "| | ms / step | tokens / s | MFU | time to ≥ 99.9% held-out exact-match | command |",
        "|---|---|---|---|---|---|",
    ]
    for name, digits, to_target, command in rows:
        t = x["train"][digits]
        lines.append(
            f"| {name}, batch {t['batch_size']} | {t['ms_per_step']['lightning']:.1f} | {t['tokens_per_second']:,} | "
            f"{t['mfu']:.3f} | {to_target} | {command} |"
        )
    t = x["train"]["3"]
    repeat, turns = (f" --repeat {t['rounds']}", ", taking turns") if "rounds" in t else ("", "")
    lines += [
        "",
        f"`python bench.py train{repeat}` times our Lightning path, the same model in a bare PyTorch loop and a "
        f"nanoGPT-style reference (fused `c_attn`, `scaled_dot_product_attention`) side by side in one process{turns}, "
        "and measures the "
        f"machine's matrix-multiply peak in the same run: `lightning_over_bare` **{t['lightning_over_bare']:.3f}**, "
        f"`model_over_nanogpt` **{t['model_over_nanogpt']:.3f}**, MFU **{t['mfu']:.3f}** against a "
        f"{t['matmul_peak_gflops']:.0f} GFLOP/s fp32 GEMM peak, with matrix multiplication "
        f"{t['matmul_share_of_step']:.0%} of a step.",
    ]
    return "\n".join(lines)


PATHS = {  # bench.py train's paths, as docs/performance.md names them
    "lightning": "ours: Trainer + LightningModule + DataModule",
    "bare": "ours: the same model and loss in a bare PyTorch loop",
    "nanogpt": "nanoGPT-style reference (fused `c_attn`, SDPA), bare loop",
}


def block_bench(m: dict) -> str:
    """docs/performance.md: bench.py train's paths side by side on the default task, and its figures."""
    x = m.get("performance")
    if not x:
        return not_measured("performance")
    t, ms = x["train"]["3"], x["train"]["3"]["ms_per_step"]
    lines = ["| path | ms / step | tokens / s |", "|---|---|---|"]
    for path, name in PATHS.items():  # every path trains the same tokens per step
        tokens = t["tokens_per_second"] * ms["lightning"] / ms[path]
        lines.append(f"| {name} | {ms[path]:.2f} | {tokens:,.0f} |")
    figures = [
        ("`lightning_over_bare` (≥ 0.87 wanted)", f"{t['lightning_over_bare']:.3f}"),
        ("`model_over_nanogpt` (≥ 1.0 wanted)", f"{t['model_over_nanogpt']:.3f}"),
        ("`mfu`", f"{t['mfu']:.3f}"),
        ("matrix-multiply peak (2048² fp32 GEMM, same run)", f"{t['matmul_peak_gflops']:.0f} GFLOP/s"),
        ("share of a step inside matrix multiplies (torch.profiler)", f"{t['matmul_share_of_step']:.0%}"),
    ]
    lines += ["", "| figure | value |", "|---|---|", *(f"| {name} | {value} |" for name, value in figures)]
    return "\n".join(lines)


def block_bench10(m: dict) -> str:
    """docs/performance.md: one sentence of bench.py train's figures at 10 digits."""
    x = m.get("performance")
    if not x:
        return not_measured("performance")
    t, ms = x["train"]["10"], x["train"]["10"]["ms_per_step"]
    return (
        f"{ms['lightning']:.1f} ms per step (Lightning), {ms['bare']:.1f} bare, {ms['nanogpt']:.1f} for the reference; "
        f"{t['tokens_per_second']:,} tokens/s, `model_over_nanogpt` {t['model_over_nanogpt']:.3f}, MFU {t['mfu']:.3f} "
        f"against a {t['matmul_peak_gflops']:.0f} GFLOP/s peak measured in the same run. Steps to the target and "
        "whole commands, seed by seed: the README's [Arithmetic](../README.md#arithmetic) table."
    )


def block_converge(m: dict) -> str:
    x = m.get("performance")
    if not x:
        return not_measured("performance")
    c = x["converge"]
    names = {"default": "default", "previous": "AdamW recipe", "reference": "nanoGPT-style reference, bare loop"}
    lines = [
        "| recipe | steps per seed (" + ", ".join(map(str, c["seeds"])) + ") | training s (median) | "
        "whole command s (median) | lowest test exact-match | never-seen exact-match |",
        "|---|---|---|---|---|---|",
    ]
    for name, v in c["variants"].items():
        steps = " / ".join(str(r.get("steps", "failed")) for r in v["runs"])
        wall = f"{v['median_wall_seconds']:.1f}" if v["median_wall_seconds"] else "—"
        unseen = [r["unseen_exact_match"] for r in v["runs"] if r.get("unseen_exact_match") is not None]
        lines.append(
            f"| {names[name]} | {steps} | {v['median_train_seconds']:.1f} | {wall} | "
            f"{pct(v['min_test_exact_match'])} | {pct(min(unseen)) if unseen else '—'} |"
        )
    timed = sorted((r for r in c["variants"]["default"]["runs"] if r.get("phases")), key=lambda r: r["wall_seconds"])
    if timed:  # the run of median whole-command seconds: one slowed by a neighbour does not speak for the rest
        median = timed[(len(timed) - 1) // 2]
        lines += [
            "",
            f"Where the default command spends its seconds (results.json `phases` of seed {median['seed']}, the median "
            f"run, {median['wall_seconds']:.1f} s whole): "
            + ", ".join(f"{name} {seconds:.2f}" for name, seconds in median["phases"].items())
            + ".",
        ]
    q = x["quick_sweep"]
    steps = {recipe: " / ".join(str(s) for s in q[recipe]["steps"].values()) for recipe in q}
    lines += [
        "",
        f"Default over AdamW (medians over seeds): steps ×{c['steps_ratio']}, training seconds "
        f"×{c['train_seconds_ratio']}, whole command ×{c['wall_seconds_ratio']}. The quick sweep "
        f"(`python train.py -m experiment=quick_sweep`, 1/2/4/8 heads) takes {secs(q['default']['whole_seconds'])} "
        f"(steps {steps['default']}); with the AdamW recipe {secs(q['previous']['whole_seconds'])} "
        f"(steps {steps['previous']}).",
    ]
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[dict], str]] = {
    "performance": block_performance,
    "converge": block_converge,
    "bench": block_bench,
    "bench10": block_bench10,
    "arithmetic": block_arithmetic,
    "length": block_length,
    "length_options": block_length_options,
    "length_summary": block_length_summary,
    "add10_verify": block_add10_verify,
    "add10_recipe": block_add10_recipe,
    "mul_working": block_mul_working,
    "recipe_search": block_recipe_search,
    "mul_summary": block_mul_summary,
    "add10_recipe_summary": block_add10_recipe_summary,
    "add10_verdict": block_add10_verdict,
    "answer_order": block_answer_order,
    "circuits": block_circuits,
    "circuits_tasks": block_circuits_tasks,
    "machine": block_machine,
    "summary": block_summary,
    "results": block_results,
    "ablation": block_ablation,
    "dla": block_dla,
    "calc_eval": block_calc_eval,
    "bad_configs": block_bad_configs,
    "decode": block_decode,
    "export": block_export,
    "export_check": block_export_check,
    "report_kb": block_report_kb,
    "quick_sweep": block_quick_sweep,
    "head_sweep": block_head_sweep,
    "why_multi_head": block_why_multi_head,
    "why_multi_head_verdict": block_why_multi_head_verdict,
    "patching": block_patching,
}
BLOCK = re.compile(r"(<!-- measured:(\w+) -->)(\n?)(.*?)(\n?)(<!-- /measured -->)", re.S)


def render(text: str, measured: dict) -> str:
    """``text`` with every measured block re-rendered from ``measured``: a block on lines of its own, or inline
    within a sentence (a KeyError names an unknown block)."""
    return BLOCK.sub(lambda b: b[1] + b[3] + BLOCKS[b[2]](measured) + b[5] + b[6], text)


def blocks_in(text: str) -> list[str]:
    return [b[2] for b in BLOCK.finditer(text)]


def render_docs(measured: dict | None = None) -> list[Path]:
    measured = load_measured() if measured is None else measured
    changed = []
    for path in DOCS:
        text = path.read_text()
        new = render(text, measured)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


# ---- the command ----------------------------------------------------------------------------------------
def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import torch

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": platform.system(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return (head.stdout.strip() or "unknown") + (" (+ uncommitted changes)" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    names = [s.name for s in SECTIONS]
    parser = argparse.ArgumentParser(prog="python docs/regenerate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=names, metavar="SECTION", help=f"of: {', '.join(names)}")
    parser.add_argument("--list", action="store_true", help="list the sections and stop")
    parser.add_argument("--render", action="store_true", help="re-render the Markdown blocks only")
    parser.add_argument("--keep", type=Path, help="run in this directory and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.list:
        for s in SECTIONS:
            print(f"{s.name:15} {s.cost:45} {(s.build.__doc__ or '').strip()}")
        return 0
    if not args.render:
        from model.optional import MissingExtraError, require

        chosen = [s for s in SECTIONS if args.only is None or s.name in args.only]
        for section in chosen:  # before anything is trained: a missing package is one line, not a lost hour
            try:
                require(f"the {section.name} section", *section.extra)
            except MissingExtraError as e:
                sys.exit(f"error: {e} (or leave the section out with --only)")
        MEASURED.mkdir(exist_ok=True)
        scratch = args.keep or Path(tempfile.mkdtemp(prefix="tinycalc-docs-"))
        scratch.mkdir(parents=True, exist_ok=True)
        machine_file = MEASURED / "machine.json"
        where = json.loads(machine_file.read_text()) if machine_file.is_file() else {"sections": {}}
        where["machine"] = machine()
        for section in chosen:
            started, at, load = time.perf_counter(), commit(), os.getloadavg()[0]
            print(f"{section.name}: {(section.build.__doc__ or '').strip().splitlines()[0]}", flush=True)
            facts = section.build(scratch)
            facts.pop("run_dir", None)
            seconds = round(time.perf_counter() - started, 1)
            (MEASURED / f"{section.name}.json").write_text(json.dumps(facts, indent=2, ensure_ascii=False) + "\n")
            where["sections"][section.name] = {
                "date": dt.date.today().isoformat(),
                "commit": at,
                "load": [round(load, 1), round(os.getloadavg()[0], 1)],  # 1-minute load average, start and end
                "runs": facts.get("command", (section.build.__doc__ or "").strip().splitlines()[0]),
                "seconds": seconds,
            }
            machine_file.write_text(json.dumps(where, indent=2) + "\n")
            print(f"{section.name}: {secs(seconds)} -> docs/measured/{section.name}.json", flush=True)
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    for path in render_docs():
        print(f"rendered {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
