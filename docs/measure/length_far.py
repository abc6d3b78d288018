"""``experiment=add_length`` asked 5,000-digit sums (500x its trained length) on seeds 0-2: ``python calc.py --eval``
on a file of random and carry-heavy problems (AdderBoard's suites at 5,000 digits, a few of each), timed, with its
peak memory."""

from __future__ import annotations

import json
import random
from pathlib import Path

from .common import ROOT, RUN, Variant, not_measured, run, run_variants, secs

WIDTH = 5_000  # digits of both operands
PER_SUITE = 10  # problems drawn from each of verify.py's suites at WIDTH
SEED = 5_000  # the draw; none of it can have been trained on (training problems have at most 10 digits)
COMMAND = "python train.py experiment=add_length seed=S threads=1, then python calc.py --ckpt RUN --eval far.txt"
COST = "~35 min"
RUNS = [Variant("+", "add_length", seeds=(0, 1, 2))]


def far_problems() -> dict[str, list]:
    """verify.py's suites at :data:`WIDTH` digits (analysis/adderboard.py), :data:`PER_SUITE` of each drawn at
    random: random pairs, carry patterns, carries through every place, sum-9 cascades, runs of 0s and 9s, mixed
    lengths."""
    from analysis.adderboard import suites

    rng = random.Random(SEED)
    every = suites(SEED, WIDTH)
    return {name: rng.sample(problems, min(PER_SUITE, len(problems))) for name, problems in every.items() if problems}


def write_problems(path: Path) -> dict[str, list[int]]:
    """The problems as an --eval file (``a+b=truth`` per line); each suite's line numbers."""
    from data.text import allow_digits

    allow_digits(2 * WIDTH + 1)
    lines, by_suite = [], {}
    for name, problems in far_problems().items():
        by_suite[name] = list(range(len(lines) + 1, len(lines) + len(problems) + 1))
        lines += [f"{p.text}={p.truth}" for p in problems]
    path.write_text("\n".join(lines) + "\n")
    return by_suite


def measure(scratch: Path) -> dict:
    """experiment=add_length on seeds 0, 1, 2, each asked the 5,000-digit problems by python calc.py --eval --json
    right after it trains (two runs at a time): right per suite, seconds and peak memory of the command."""
    problems = scratch / "far.txt"
    by_suite = write_problems(problems)
    n = sum(map(len, by_suite.values()))

    def asked(out: Path, _results: dict) -> dict:
        asking = ["--ckpt", str(out), "--eval", str(problems), "--json", "--show-mistakes", str(n)]
        ran = run([str(ROOT / "calc.py"), *asking], out, merged=False)
        report = json.loads(ran.stdout)
        wrong = {m["line"] for m in report["mistakes"]}
        right = {name: sum(line not in wrong for line in lines) for name, lines in by_suite.items()}
        return {"far_right": right, "far_n": report["n_problems"], "far_seconds": ran.seconds,
                "far_peak_gb": ran.peak_gb, "far_invalid": report["n_invalid"]}  # fmt: skip

    runs = run_variants(scratch, "length_far", RUNS, asked)
    suites = {name: len(lines) for name, lines in by_suite.items()}
    command = f"python calc.py --ckpt {RUN} --eval far.txt --json"
    return {"command": COMMAND, "eval_command": command, "width": WIDTH, "suites": suites, "runs": runs}


def block_length_far(m: dict) -> str:
    x = m.get("length_far")
    if not x:
        return not_measured("length_far")
    names = list(x["suites"])
    head = " | ".join(f"{name} ({x['suites'][name]})" for name in names)
    lines = [
        f"| seed | steps | training | {head} | all | `calc.py --eval` | peak memory |",
        "|---|---|---|" + "---|" * len(names) + "---|---|---|",
    ]
    for r in x["runs"]:
        right = r["far_right"]
        cells = " | ".join(f"{right[name]} / {x['suites'][name]}" for name in names)
        total = sum(right.values())
        lines.append(
            f"| {r['seed']} | {r['steps']:,} | {secs(r['train_seconds'])} | {cells} "
            f"| **{total} / {r['far_n']} ({total / r['far_n']:.1%})** | {secs(r['far_seconds'])} "
            f"| {r['far_peak_gb']:.2f} GB |"
        )
    return "\n".join(lines)


BLOCKS = {"length_far": block_length_far}
