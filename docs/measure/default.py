"""The default run, ``python train.py`` (seed 0): the summary it prints, the Results row, ablation, direct logit
attribution, the attention maps and report.html's screenshot. Other sections read this run (``default_run``)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from .common import IMAGES, RUN, code_hash, hide_scratch, image, not_measured, pct, results, screenshot, train, wrap
from .seeds import seeds_row

COMMAND = "python train.py"
COST = "~1 min"
DRAWS = {  # figure -> the code that draws it: a figure is stale when any of these changed since it was drawn
    "ablation.png": ["analysis/plots.py", "analysis/metrics/ablation.py"],
    "dla.png": ["analysis/plots.py", "analysis/metrics/dla.py"],
    "attention_layer0.png": ["analysis/plots.py", "analysis/maps.py"],
    "report.png": [
        "analysis/report_page.js",
        "analysis/report_page.html",
        "analysis/html_report.py",
        "analysis/lab.js",
    ],
}


def default_run(scratch: Path) -> Path:
    """The default section's run directory in ``scratch``, trained now when --only left that section out."""
    run_dir = scratch / RUN
    if not (run_dir / "results.json").is_file():
        train(scratch, f"hydra.run.dir='{RUN}'")
    return run_dir


def measure(scratch: Path) -> dict:
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
    for name, source in (("ablation.png", "ablation.png"), ("dla.png", "dla.png")):
        image(images, run_dir / source, name, DRAWS[name])
    layer0 = sorted((run_dir / "attention").glob("final*layer0*.png"))[0]
    image(images, layer0, "attention_layer0.png", DRAWS["attention_layer0.png"])
    if screenshot(run_dir / "report.html", IMAGES / "report.png", 1500, scratch):
        images["report.png"] = code_hash(DRAWS["report.png"])
    summary = hide_scratch(ran.stdout[ran.stdout.index("tinycalc run") :].rstrip(), scratch)
    return {
        "command": COMMAND,
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
    if m.get("seeds"):
        lines.append(seeds_row(m["seeds"], d["n_params"]))
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


def block_ablation_sentence(m: dict) -> str:
    """The README's sentence: what switching each head of the default run off costs, on lines of their own."""
    d = m.get("default")
    if not d:
        return not_measured("default")
    cost = ", ".join(f"{head} {points:+.1f}" for head, points in d["ablation_zero"].items())
    return wrap(f"Switching each head of the default run off (zeroed) changes its exact-match by (points): {cost}.")


def block_dla(m: dict) -> str:
    d = m.get("default")
    if not d:
        return not_measured("default")
    top = ", ".join(f"{x['head']} {x['logits']:+.2f}" for x in d["dla"])
    return f"In the same run the largest direct effects, over all answer digits, are {top} logits."


def block_report_kb(m: dict) -> str:
    d = m.get("default")
    return "(not measured yet)" if not d else f"{d['report_kb']} KB"


def block_seconds(m: dict) -> str:
    """The README's time for ``python train.py``: the total on the sample summary's own ``seconds`` line."""
    d = m.get("default")
    total = re.search(r"^seconds .*= ([\d.]+)$", d["summary"], re.M) if d else None
    return f"{float(total.group(1)):.0f} seconds" if total else "(not measured yet)"


BLOCKS = {
    "summary": block_summary,
    "seconds": block_seconds,
    "results": block_results,
    "ablation": block_ablation,
    "ablation_sentence": block_ablation_sentence,
    "dla": block_dla,
    "report_kb": block_report_kb,
}
