"""Speed, side by side: ``python bench.py train`` (3 and 10 digits), ``python bench.py converge`` (seeds 0-4), and the
quick sweep's whole command under the default recipe and under the AdamW one."""

from __future__ import annotations

from pathlib import Path

from .common import bench, finished_jobs, not_measured, pct, results, secs, train

COMMAND = "python bench.py train [--digits 10]; python bench.py converge; the quick sweep, both recipes"
COST = "~15 min (on a quiet machine: it times)"
ROUNDS = 5  # bench.py train --repeat: the variants take turns this many times, each figure a median
KEEP = ("ms_per_step", "tokens_per_second", "mfu", "lightning_over_bare", "model_over_nanogpt")
KEEP += ("matmul_peak_gflops", "matmul_share_of_step", "batch_size")
PATHS = {  # bench.py train's paths, as docs/performance.md names them
    "lightning": "ours: Trainer + LightningModule + DataModule",
    "bare": "ours: the same model and loss in a bare PyTorch loop",
    "nanogpt": "nanoGPT-style reference (fused `c_attn`, SDPA), bare loop",
}


def measure(scratch: Path) -> dict:
    """python bench.py train (3 and 10 digits), python bench.py converge (seeds 0-4), and the quick sweep's whole
    command under the default recipe and under the AdamW one."""
    from benchmarks.converge import PREVIOUS_RECIPE

    train_speed = {}
    for digits in (3, 10):
        figures = bench(scratch, "train", "--digits", str(digits), "--repeat", str(ROUNDS))["train"]
        train_speed[str(digits)] = {key: figures[key] for key in KEEP} | {"rounds": ROUNDS}
    converge = bench(scratch, "converge")["converge"]
    sweeps = {}
    for recipe, overrides in (("default", ()), ("previous", PREVIOUS_RECIPE)):
        ran = train(scratch, "-m", "experiment=quick_sweep", *overrides, f"hydra.sweep.dir=multirun/speed_{recipe}")
        jobs = [results(job) for job in finished_jobs(scratch / f"multirun/speed_{recipe}")]
        sweeps[recipe] = {
            "command": " ".join(["python train.py -m experiment=quick_sweep", *overrides]),
            "whole_seconds": ran.seconds,
            "steps": {str(r["n_heads"]): r["steps"] for r in jobs},
            "test_exact_match": {str(r["n_heads"]): r["test_exact_match"] for r in jobs},
        }
    return {"command": COMMAND, "train": train_speed, "converge": converge, "quick_sweep": sweeps}


def block_performance(m: dict) -> str:
    """docs/performance.md's first table: both tasks' speed, and bench.py train's figures in one sentence."""
    x = m.get("performance")
    if not x:
        return not_measured("performance")
    rows = [
        ("3-digit addition (default)", "3", "[the default run](results.md#the-default-run)",
         "`python bench.py train`; `python train.py`"),
        ("10-digit addition (`add10`)", "10", "every seed: [every task](arithmetic.md#every-task)",
         "`python bench.py train --digits 10`; `python train.py experiment=add10`"),
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


def block_bench(m: dict) -> str:
    """bench.py train's paths side by side on the default task, and its figures."""
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
    """One sentence of bench.py train's figures at 10 digits."""
    x = m.get("performance")
    if not x:
        return not_measured("performance")
    t, ms = x["train"]["10"], x["train"]["10"]["ms_per_step"]
    return (
        f"{ms['lightning']:.1f} ms per step (Lightning), {ms['bare']:.1f} bare, {ms['nanogpt']:.1f} for the reference; "
        f"{t['tokens_per_second']:,} tokens/s, `model_over_nanogpt` {t['model_over_nanogpt']:.3f}, MFU {t['mfu']:.3f} "
        f"against a {t['matmul_peak_gflops']:.0f} GFLOP/s peak measured in the same run. Steps to the target and "
        "whole commands, seed by seed: the [every task](arithmetic.md#every-task) table."
    )


def block_converge(m: dict) -> str:
    """Time to accuracy: the default recipe against the AdamW one and the reference, and the quick sweep under both."""
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


BLOCKS = {"performance": block_performance, "bench": block_bench, "bench10": block_bench10, "converge": block_converge}
