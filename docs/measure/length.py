"""Beyond the trained length: ``experiment=add_length`` and ``experiment=sub_length`` on seeds 0-2, the other position
schemes on seed 0; exact-match by operand length, its figure, and ``python verify.py`` on every addition run."""

from __future__ import annotations

from pathlib import Path

from .common import Variant, image, not_measured, pct, run_variants, secs, verify

COMMAND = "python train.py experiment=add_length seed=S threads=1 (and experiment=sub_length)"
COST = "~25 min"
DRAWS = {"length.png": ["analysis/length_figure.py", "analysis/metrics/length.py"]}
RUNS = [  # the experiments on seeds 0-2, the other position schemes on seed 0
    Variant("+", "add_length", seeds=(0, 1, 2)),
    Variant("-", "sub_length", seeds=(0, 1, 2)),
    *(Variant("+", "add_length", (f"position={p}",)) for p in ("relative", "coupling", "abacus", "absolute")),
]
WIDTHS = (1, 5, 10, 11, 12, 15, 20, 25, 30, 35, 40)  # the widths the docs' table shows


def scheme_name(model) -> str:
    """A length run's position scheme, named from its model config as the docs name it."""
    if not model.place_embedding:
        return "absolute"
    name = {"own": "abacus"}.get(model.place_of, "coupling")
    name += (" + place window" if model.get("place_window") else " + place scores") if model.get("place_bias") else ""
    return name + (f" + {model.random_places:.0%} randomised places" if model.get("random_places") else "")


def measure(scratch: Path) -> dict:
    """experiment=add_length and experiment=sub_length on seeds 0, 1, 2, and place scores without the window,
    coupling alone, abacus and absolute positions on seed 0: exact-match by operand length, the figure, and
    python verify.py on every addition run."""
    from omegaconf import OmegaConf

    def scheme_and_verdict(out: Path, r: dict) -> dict:
        position = scheme_name(OmegaConf.load(out / "config.yaml").model)
        return {"position": position, "verify": verify(out, scratch) if "+" in r["length_exact_match"] else None}

    runs = run_variants(scratch, "length", RUNS, scheme_and_verdict)
    return {"command": COMMAND, "runs": runs, "images": draw(runs, scratch)}


def draw(runs: list[dict], scratch: Path) -> dict[str, str]:
    """docs/images/length.png from the section's runs (their curves are in docs/measured/length.json)."""
    from analysis.length_figure import length_curves
    from analysis.record import save_figure

    curves = {
        f"{r['position']}{'' if op == '+' else ', subtraction'}, seed {r['seed']}": {int(w): x for w, x in c.items()}
        for r in runs for op, c in r["length"].items()
    }  # fmt: skip
    figure = scratch / "length.png"
    save_figure(length_curves(curves, 10), figure)
    images: dict[str, str] = {}
    image(images, figure, "length.png", DRAWS["length.png"])
    return images


def block_length(m: dict) -> str:
    x = m.get("length")
    if not x:
        return not_measured("length")
    lines = [
        "| task | position | seed | steps | training | " + " | ".join(f"{w} digits" for w in WIDTHS) + " | verify.py |",
        "|---|---|---|---|---|" + "---|" * len(WIDTHS) + "---|",
    ]
    for r in x["runs"]:
        (op, curve), v = next(iter(r["length"].items())), r["verify"]
        cells = " | ".join(pct(curve.get(str(w)), 1) for w in WIDTHS)
        failed = [name for name, suite in v["suites"].items() if not suite["passed"]] if v else []
        verdict = "pass" if v and v["passed"] else "fails " + ", ".join(failed) if v else "—"
        task = {"+": "`+`", "-": "`-`, larger first"}[op]
        lines.append(
            f"| {task} | {r['position']} | {r['seed']} | {r['steps']:,} | {secs(r['train_seconds'])} | {cells} "
            f"| {verdict} |"
        )
    return "\n".join([*lines, "", "![exact-match by operand length](images/length.png)"])


def block_length_summary(m: dict) -> str:
    """One sentence: the experiments' exact-match at 20, 30 and 40 digits, seed by seed."""
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


BLOCKS = {"length": block_length, "length_summary": block_length_summary}
