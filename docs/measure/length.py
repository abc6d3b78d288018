"""Beyond the trained length: ``experiment=add_length`` and ``experiment=sub_length`` on seeds 0-2, the place window
with a place table on seed 0; exact-match by operand length (to 1,000 digits), its figure, and ``python verify.py``
(at 10 and at 100 digits) on every addition run."""

from __future__ import annotations

from pathlib import Path

from .common import Variant, image, not_measured, pct, run_variants, secs, verify

COMMAND = "python train.py experiment=add_length seed=S threads=1 (and experiment=sub_length)"
COST = "~30 min"
DRAWS = {"length.png": ["analysis/length_figure.py", "analysis/metrics/length.py"]}
RUNS = [  # the experiments on seeds 0-2; the place window with a place table (the scheme before, to 40 digits) on 0
    Variant("+", "add_length", seeds=(0, 1, 2)),
    Variant("-", "sub_length", seeds=(0, 1, 2)),
    Variant("+", "add_length", ("position=window",)),
]
WIDTHS = (1, 10, 20, 40, 100, 200, 500, 1000)  # the widths the docs' table shows
LONG = 100  # verify.py --digits LONG on every addition run that addresses it
PUBLISHED = (  # the longest length right against the trained one, as each paper reports it
    ("Abacus embeddings (McLeish et al. 2024), one training run", 20, "100-120"),
    ("position coupling (Cho et al. 2024), one training run", 30, "200"),
    ("self-improvement (Lee et al. 2025), many rounds of retraining on its own longer answers", 10, "100"),
)


def scheme_name(model) -> str:
    """A length run's position scheme, named from its model config as the docs name it."""
    if not model.place_embedding:
        return "absolute"
    if model.get("place_vectors") is False:
        return f"local (places as differences only, window of {model.place_bias})"
    name = {"own": "abacus"}.get(model.place_of, "coupling")
    name += (" + place window" if model.get("place_window") else " + place scores") if model.get("place_bias") else ""
    return name + (f" + {model.random_places:.0%} randomised places" if model.get("random_places") else "")


def seconds_by_length(run_dir: Path) -> dict[str, float]:
    """A run's length.csv (one row per operator and width) as the seconds each width took, by its digits."""
    import csv

    path = run_dir / "length.csv"
    rows = csv.DictReader(path.open()) if path.exists() else []
    return {str(int(row["digits"])): float(row["seconds"]) for row in rows if row.get("seconds")}


def width_head(widths) -> str:
    """A length table's width columns: '10 digits | 20 digits | ...'."""
    return " | ".join(f"{w:,} digits" for w in widths)


def width_cells(curve: dict, widths) -> str:
    """A run's exact-match at each of ``widths`` (its curve: width as text -> share right), one column each."""
    return " | ".join(pct(curve.get(str(w)), 1) for w in widths)


def ours_row(experiment: str, runs: list[dict], curves: list[dict], trained: int, what: str = "") -> str:
    """The published-records table's row for this project's runs of ``experiment`` (their length curves): the
    longest width each is right at (every width up to it >= 99%), and the seconds its 1,000-digit problems took."""
    reach = [longest_right(curve) for curve in curves]
    seconds = [r.get("seconds_by_length", {}).get("1000") for r in runs]
    timed = f"; {min(seconds):.0f}-{max(seconds):.0f} s to answer the 1,000-digit ones" if all(seconds) else ""
    return (
        f"| this project, `experiment={experiment}`{what} (seeds {'/'.join(str(r['seed']) for r in runs)}{timed}) "
        f"| {trained} digits | {' / '.join(f'{w:,}' for w in reach)} digits (every length measured, >= 99%) "
        f"| {f'{min(reach) // trained}x' if min(reach) >= trained else 'below 1x'} |"
    )


def measure(scratch: Path) -> dict:
    """experiment=add_length and experiment=sub_length on seeds 0, 1, 2, and position=window (the place window with
    a place table) on seed 0: exact-match by operand length, the seconds to answer each length, the figure, and
    python verify.py on every addition run (and --digits 100 where the model addresses 100 digits)."""
    from omegaconf import OmegaConf

    def scheme_and_verdict(out: Path, r: dict) -> dict:
        position = scheme_name(OmegaConf.load(out / "config.yaml").model)
        adds, reach = "+" in r["length_exact_match"], max(map(int, r["length_exact_match"].get("+", {})), default=0)
        return {
            "position": position,
            "verify": verify(out, scratch) if adds else None,
            "verify_long": verify(out, scratch, "--digits", str(LONG)) if adds and reach >= LONG else None,
            "seconds_by_length": seconds_by_length(out),
        }

    runs = run_variants(scratch, "length", RUNS, scheme_and_verdict)
    return {"command": COMMAND, "runs": runs, "images": draw(runs, scratch)}


def draw(runs: list[dict], scratch: Path) -> dict[str, str]:
    """docs/images/length.png from the section's runs (their curves are in docs/measured/length.json)."""
    from analysis.length_figure import length_curves
    from analysis.record import save_figure

    curves = {
        f"{r['position'].split(' (')[0]}{'' if op == '+' else ', subtraction'}, seed {r['seed']}": {
            int(w): x for w, x in c.items()
        }
        for r in runs for op, c in r["length"].items()
    }  # fmt: skip
    figure = scratch / "length.png"
    save_figure(length_curves(curves, 10), figure)
    images: dict[str, str] = {}
    image(images, figure, "length.png", DRAWS["length.png"])
    return images


def verdict(v: dict | None) -> str:
    if not v:
        return "—"
    failed = [name for name, suite in v["suites"].items() if not suite["passed"]]
    return "pass" if v["passed"] else "fails " + ", ".join(failed)


def block_length(m: dict) -> str:
    x = m.get("length")
    if not x:
        return not_measured("length")
    widths = width_head(WIDTHS)
    lines = [
        f"| task | position | seed | steps | training | {widths} | verify.py | verify.py --digits {LONG} |",
        "|---|---|---|---|---|" + "---|" * len(WIDTHS) + "---|---|",
    ]
    for r in x["runs"]:
        op, curve = next(iter(r["length"].items()))
        cells = width_cells(curve, WIDTHS)
        task = {"+": "`+`", "-": "`-`, larger first"}[op]
        lines.append(
            f"| {task} | {r['position']} | {r['seed']} | {r['steps']:,} | {secs(r['train_seconds'])} | {cells} "
            f"| {verdict(r['verify'])} | {verdict(r.get('verify_long'))} |"
        )
    return "\n".join([*lines, "", "![exact-match by operand length](images/length.png)"])


def experiment_runs(x: dict, op: str) -> list[dict]:
    """The runs of experiment=add_length ('+') or experiment=sub_length ('-') as they are, seed by seed."""
    command = {"+": "python train.py experiment=add_length", "-": "python train.py experiment=sub_length"}[op]
    return [r for r in x["runs"] if r["command"] == command]


def longest_right(curve: dict) -> int:
    """The longest width up to which every measured width is >= 99% right."""
    longest = 0
    for width in sorted(map(int, curve)):
        if curve[str(width)] < 0.99:
            break
        longest = width
    return longest


def block_length_summary(m: dict) -> str:
    """One sentence: the experiments' exact-match at 100, 200 and 1,000 digits, seed by seed."""
    x = m.get("length")
    if not x:
        return not_measured("length")
    parts = []
    for op, name in (("+", "addition"), ("-", "subtraction")):
        runs = experiment_runs(x, op)
        at = {w: " / ".join(pct(r["length"][op].get(str(w)), 1) for r in runs) for w in (100, 200, 1000)}
        seeds = " / ".join(str(r["seed"]) for r in runs)
        parts.append(f"{name} (seeds {seeds}) {at[100]} at 100 digits, {at[200]} at 200 and {at[1000]} at 1,000")
    return "; ".join(parts) + "."


def block_length_published(m: dict) -> str:
    """Trained length against the longest right, ours beside the published records of one training run."""
    x = m.get("length")
    if not x:
        return not_measured("length")
    lines = ["| method | trained on | right up to | ratio |", "|---|---|---|---|"]
    for method, trained, reached in PUBLISHED:
        top = int(reached.split("-")[-1])
        lines.append(f"| {method} | {trained} digits | {reached} digits | {top / trained:.0f}x |")
    for op in ("+", "-"):
        runs = experiment_runs(x, op)
        if not runs:
            continue
        experiment = {"+": "add_length", "-": "sub_length"}[op]
        lines.append(ours_row(experiment, runs, [r["length"][op] for r in runs], 10))
    return "\n".join(lines)


BLOCKS = {"length": block_length, "length_summary": block_length_summary, "length_published": block_length_published}
