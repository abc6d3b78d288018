"""Speed benchmarks:  python bench.py [decode] [train] [analysis] [--ckpt P] [--n N] [--repeat R] [--digits D] [--json]

decode   -- (1) evaluation of N random problems end to end, as ``calc.py --eval`` does it: parse the text
            lines, encode, decode greedily with the KV cache, score; (2) greedy decoding throughput of the
            same prompts with and without the KV cache (``Transformer.generate(use_cache=...)``).
train    -- training throughput side by side (training/speed.py): our Lightning path, the same model in a
            bare loop, a nanoGPT-style reference; tokens/s, their ratios, MFU against a measured matmul peak.
analysis -- what looking inside costs: the default ``python train.py`` timed with and without attention
            maps + ablation + pruning (``analysis=none callbacks.attention_maps=null``), the two kinds
            alternating, --repeat runs of each (minutes: each run is a full training run).

With no section named, decode and train run. Without --ckpt, decode uses a freshly initialised default
model (3-digit addition, d_model=64, 4 heads, 2 layers): speed does not depend on the weights. Each decode
figure is the fastest of --repeat runs, train figures are medians over --repeat rounds (timings on a shared
machine are noisy); torch uses as many threads as OMP_NUM_THREADS allows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from data.expressions import read_problems
from data.problems import ProblemFormat
from data.tokenizer import CharTokenizer
from model.calculator import Calculator
from model.checkpoint import CheckpointError, load_calculator
from model.transformer import Transformer, TransformerConfig


def fresh_calculator() -> Calculator:
    torch.manual_seed(0)
    fmt, tokenizer = ProblemFormat(), CharTokenizer()
    net = Transformer(TransformerConfig(vocab_size=tokenizer.vocab_size, block_size=fmt.seq_len))
    return Calculator(net, fmt, tokenizer)


def fastest(fn, repeat: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times), times


def bench_decode(calc: Calculator, n: int, repeat: int) -> dict:
    fmt = calc.fmt
    a, op_idx, b = fmt.random_problems(n, torch.Generator().manual_seed(0))
    lines = [f"{x}{fmt.operators[o]}{y}" for x, o, y in zip(a.tolist(), op_idx.tolist(), b.tolist(), strict=True)]

    def evaluate() -> dict:
        problems = read_problems(lines, fmt)
        return calc.evaluate(problems.problems, problems.lines)

    report = evaluate()  # warm-up, and the accuracy of this model on these problems
    eval_seconds, eval_runs = fastest(evaluate, repeat)
    prompts = calc.encode(read_problems(lines, fmt).problems)[:, : fmt.prompt_len]  # (n, prompt_len)
    decode = {}
    for name, use_cache in (("kv_cache", True), ("no_cache", False)):
        seconds, _ = fastest(lambda use_cache=use_cache: calc.generate(prompts, use_cache=use_cache), repeat)
        decode[name] = {
            "seconds": round(seconds, 4),
            "tokens_per_second": round(n * fmt.answer_len / seconds),
            "problems_per_second": round(n / seconds),
        }
    return {
        "problems": f"{n} random {fmt.digits}-digit {' '.join(fmt.operators)} problems",
        "n": n,
        "eval_seconds": round(eval_seconds, 4),
        "eval_seconds_runs": [round(t, 4) for t in eval_runs],
        "eval_exact_match": report["exact_match"],
        "decode": decode,
        "kv_cache_speedup": round(decode["no_cache"]["seconds"] / decode["kv_cache"]["seconds"], 2),
        "answer_tokens": fmt.answer_len,
        "batch_size": calc.batch_size,
    }


def bench_analysis(repeat: int) -> dict:
    """Whole ``python train.py`` runs, with and without analysis, alternating so both see the same machine."""
    import subprocess
    import tempfile
    from pathlib import Path

    root = Path(__file__).resolve().parent
    variants = {"with_analysis": [], "without_analysis": ["analysis=none", "callbacks.attention_maps=null"]}
    walls: dict[str, list[float]] = {name: [] for name in variants}
    analysis_seconds, steps = [], {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            for name, overrides in variants.items():
                run_dir = Path(tmp) / f"{name}{i}"
                started = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, str(root / "train.py"), f"hydra.run.dir={run_dir}", *overrides],
                    cwd=root,
                    capture_output=True,
                    text=True,
                )
                walls[name].append(time.perf_counter() - started)
                if done.returncode != 0:
                    raise RuntimeError(f"train.py failed: {done.stderr.strip().splitlines()[-1:]}")
                results = json.loads((run_dir / "results.json").read_text())
                steps[name].append(results["steps"])
                if name == "with_analysis":
                    analysis_seconds.append(results["analysis_seconds"])
    median = {name: sorted(times)[len(times) // 2] for name, times in walls.items()}
    return {
        "command": "python train.py  vs  python train.py analysis=none callbacks.attention_maps=null",
        "runs_each": repeat,
        "wall_seconds": {name: [round(t, 2) for t in times] for name, times in walls.items()},
        "steps": steps,
        "median_wall_seconds": {name: round(t, 2) for name, t in median.items()},
        "overhead": round(median["with_analysis"] / median["without_analysis"] - 1, 4),
        "analysis_seconds_in_process": analysis_seconds,
    }


def bench_training(repeat: int, digits: int) -> dict:
    from training.speed import bench_train

    return bench_train(rounds=repeat, digits=digits)


SECTIONS = {  # name -> (calculator, command-line args) -> figures
    "decode": lambda calc, args: bench_decode(calc, args.n, args.repeat),
    "train": lambda calc, args: bench_training(args.repeat, args.digits),
    "analysis": lambda calc, args: bench_analysis(args.repeat),
}


def print_decode(r: dict, console) -> None:
    from rich.table import Table

    table = Table(
        title=f"decode: {r['problems']} (batch {r['batch_size']}, {r['answer_tokens']} answer tokens "
        "each; fastest of the runs)",
        title_justify="left",
    )
    for name in ("measure", "seconds", "answer tokens / s", "problems / s"):
        table.add_column(name, justify="left" if name == "measure" else "right")
    table.add_row("eval, end to end", f"{r['eval_seconds']:.3f}", "", f"{r['n'] / r['eval_seconds']:,.0f}")
    for name, label in (("kv_cache", "greedy decoding, KV cache"), ("no_cache", "greedy decoding, no cache")):
        d = r["decode"][name]
        table.add_row(label, f"{d['seconds']:.3f}", f"{d['tokens_per_second']:,}", f"{d['problems_per_second']:,}")
    console.print(table)
    console.print(
        f"eval = parse + encode + decode + score, runs {r['eval_seconds_runs']} s; "
        f"KV cache speed-up x{r['kv_cache_speedup']}; "
        f"exact match of this model on them {r['eval_exact_match']:.2%}"
    )


def print_train(r: dict, console) -> None:
    from rich.table import Table

    table = Table(title=f"train: {r['setup']}", title_justify="left")
    for name in ("path", "ms / step", "tokens / s"):
        table.add_column(name, justify="left" if name == "path" else "right")
    labels = {
        "lightning": "ours: Trainer + LightningModule + DataModule",
        "bare": "ours: bare PyTorch loop",
        "nanogpt": "nanoGPT-style reference, bare loop",
    }
    for name, label in labels.items():
        table.add_row(label, f"{r['ms_per_step'][name]:.2f}", f"{r['tokens_per_second_by_path'][name]:,}")
    console.print(table)
    console.print(
        f"lightning_over_bare {r['lightning_over_bare']}, model_over_nanogpt {r['model_over_nanogpt']} "
        f"(> 1 = ours faster); {r['flops_per_token']:,} FLOPs/token (reference "
        f"{r['reference_flops_per_token']:,}) x {r['tokens_per_second']:,} tokens/s over a "
        f"{r['matmul_peak_gflops']} GFLOP/s fp32 matmul peak = MFU {r['mfu']:.1%}"
    )
    console.print(
        f"where the time goes: matrix multiplies take {r['matmul_share_of_step']:.0%} of a step and run at "
        f"{r['matmul_gflops_in_step']} GFLOP/s; the rest is attention kernels, LayerNorm, GELU and "
        f"the optimizer. Data {r['data_problems_per_second']:,} problems/s; peak RSS {r['peak_rss_mb']} MB"
    )


def print_analysis(r: dict, console) -> None:
    from rich.table import Table

    table = Table(
        title=f"analysis overhead: {r['runs_each']} default runs of each kind, alternating", title_justify="left"
    )
    for name in ("run", "wall seconds (each run)", "median", "steps"):
        table.add_column(name, justify="left" if name == "run" else "right")
    for name in ("with_analysis", "without_analysis"):
        table.add_row(
            name.replace("_", " "),
            ", ".join(f"{t:.1f}" for t in r["wall_seconds"][name]),
            f"{r['median_wall_seconds'][name]:.1f}",
            ", ".join(map(str, r["steps"][name])),
        )
    console.print(table)
    console.print(
        f"overhead of maps + ablation + pruning: {r['overhead']:+.1%} of the run's wall time "
        f"(the analysis step itself: {r['analysis_seconds_in_process']} s)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "sections",
        nargs="*",
        metavar="SECTION",
        help=f"which benchmarks ({', '.join(SECTIONS)}); default: decode and train",
    )
    p.add_argument("--ckpt", help="checkpoint file or run directory (default: a freshly initialised model)")
    p.add_argument("--n", type=int, default=10_000, help="problems (default 10000)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per figure; the fastest counts (default 3)")
    p.add_argument(
        "--digits",
        type=int,
        default=3,
        help="train section: operand digits of the addition problems timed (default 3; 10 = add10)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.n < 1 or args.repeat < 1 or args.digits < 1:
        p.error("--n, --repeat and --digits must be >= 1")
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        p.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    try:
        calc = load_calculator(args.ckpt) if args.ckpt else fresh_calculator()
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    sections = args.sections or ["decode", "train"]  # 'analysis' trains several models: only when asked
    results = {
        "checkpoint": str(calc.path) if calc.path else None,
        "model": calc.describe() + ("" if calc.path else " (freshly initialised)"),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        **{name: SECTIONS[name](calc, args) for name in sections},
    }
    if "train" in results:  # the headline figures, at the top level
        results |= {
            k: results["train"][k] for k in ("lightning_over_bare", "model_over_nanogpt", "mfu", "tokens_per_second")
        }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    from rich.console import Console

    console = Console(highlight=False)
    console.print(f"{results['model']}; torch {results['torch']}, {results['threads']} thread(s)")
    if "decode" in results:
        print_decode(results["decode"], console)
    if "train" in results:
        print_train(results["train"], console)
    if "analysis" in results:
        print_analysis(results["analysis"], console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
