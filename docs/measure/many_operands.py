"""Many operands: ``experiment=sum_many`` (sums with their running sum, lines read by ``model.place_of=lined``) on seeds
0-2, trained on up to 10 operands of up to 10 digits; exact-match with n operands of n digits as far as 100 x 100,
half the problems carry-heavy (analysis/sum_length.py), and the same without lines on seed 0."""

from __future__ import annotations

from pathlib import Path

from .common import Variant, not_measured, pct, run_variants, secs
from .length import longest_right

COMMAND = "python train.py experiment=sum_many seed=S threads=1"
COST = "~55 min"
RUNS = [Variant("sums with their running sum", "sum_many", seeds=(0, 1, 2))]
OPTIONS = [Variant("without lines (`model.place_of=predicted`)", "sum_many", ("model.place_of=predicted",))]
SIZES = {10: 100, 20: 100, 30: 100, 50: 100, 100: 20}  # n operands of n digits each -> the sums asked, half uniform,
# half carry-heavy (a 100 x 100 sum is about 20,000 tokens, half of them written by the model: minutes a batch)
TRAINED = 10
PUBLISHED = (("many-operand addition, position coupling (Cho et al. 2025)", 10, 30),)  # 10 x 10 -> 30 x 30


def sizes_of(run_dir: Path, _results: dict) -> dict:
    """A trained run asked sums of each size (its best checkpoint, one thread), smallest first; once none of a size
    is right, the larger ones are not asked (the table shows -)."""
    from analysis.sum_length import accuracy_by_size
    from model.checkpoint import load_calculator

    calc, sizes = load_calculator(run_dir), {}
    for size, problems in SIZES.items():
        sizes |= accuracy_by_size(calc, (size,), problems)
        if sizes[str(size)]["exact_match"] == 0:
            break
    return {"sizes": sizes}


def measure(scratch: Path) -> dict:
    """The experiment on seeds 0-2, then without lines on seed 0: exact-match by size, n operands of n digits."""
    return {"command": COMMAND, "runs": run_variants(scratch, "many_operands", RUNS + OPTIONS, sizes_of)}


def block_many_operands(m: dict) -> str:
    x = m.get("many_operands")
    if not x:
        return not_measured("many_operands")
    most = max(SIZES.values())
    head = " | ".join(
        f"{n} x {n}" + (" (trained)" if n == TRAINED else "") + (f" ({k} sums)" if k < most else "")
        for n, k in SIZES.items()
    )
    lines = [f"| run | seed | steps | training | {head} |", "|---|---|---|---|" + "---|" * len(SIZES)]
    for r in x["runs"]:
        cells = " | ".join(
            f"{pct(s['exact_match'], 1)} ({pct(s['carry_heavy_exact_match'], 0)} carry-heavy)" if s else "-"
            for s in (r["sizes"].get(str(n)) for n in SIZES)
        )
        lines.append(f"| {r['variant']} | {r['seed']} | {r['steps']:,} | {secs(r['train_seconds'])} | {cells} |")
    return "\n".join(lines)


def reach(run: dict) -> int:
    """The largest size at which this run, and every smaller size measured, is >= 99% right (0: none)."""
    return longest_right({size: s["exact_match"] for size, s in run["sizes"].items()})


def block_many_operands_published(m: dict) -> str:
    x = m.get("many_operands")
    if not x:
        return not_measured("many_operands")
    lines = ["| method | trained on | right up to | ratio |", "|---|---|---|---|"]
    for method, theirs, reached in PUBLISHED:
        lines.append(f"| {method} | {theirs} x {theirs} | {reached} x {reached} | {reached / theirs:.1f}x |")
    runs = [r for r in x["runs"] if r["command"] == "python train.py experiment=sum_many"]
    reached = [reach(r) for r in runs]
    seeds = "/".join(str(r["seed"]) for r in runs)
    ours = " / ".join(f"{n} x {n}" if n else "none" for n in reached)
    ratio = f"{min(reached) / TRAINED:.1f}x" if min(reached) >= TRAINED else "below 1x"
    lines.append(
        f"| this project, `experiment=sum_many` (seeds {seeds}) | {TRAINED} x {TRAINED} | {ours} (every size "
        f"measured, >= 99%) | {ratio} |"
    )
    return "\n".join(lines)


BLOCKS = {"many_operands": block_many_operands, "many_operands_published": block_many_operands_published}
