"""Speed benchmarks:  python bench.py [decode] [--ckpt PATH] [--n 10000] [--repeat 3] [--json]

decode -- (1) evaluation of N random problems end to end, as ``calc.py --eval`` does it: parse the text
          lines, encode, decode greedily with the KV cache, score; (2) greedy decoding throughput of the
          same prompts with and without the KV cache (``Transformer.generate(use_cache=...)``).

Without --ckpt a freshly initialised default model (3-digit addition, d_model=64, 4 heads, 2 layers) is
used: speed does not depend on the weights. Each figure is the fastest of --repeat runs (timings on a
shared machine are noisy); torch uses as many threads as OMP_NUM_THREADS allows.
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
    prompts = calc.encode(read_problems(lines, fmt).problems)[:, :fmt.prompt_len]  # (n, prompt_len)
    decode = {}
    for name, use_cache in (("kv_cache", True), ("no_cache", False)):
        seconds, _ = fastest(lambda use_cache=use_cache: calc.generate(prompts, use_cache=use_cache), repeat)
        decode[name] = {"seconds": round(seconds, 4), "tokens_per_second": round(n * fmt.answer_len / seconds),
                        "problems_per_second": round(n / seconds)}
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


SECTIONS = {"decode": bench_decode}


def print_decode(r: dict, console) -> None:
    from rich.table import Table

    table = Table(title=f"decode: {r['problems']} (batch {r['batch_size']}, {r['answer_tokens']} answer tokens "
                        "each; fastest of the runs)", title_justify="left")
    for name in ("measure", "seconds", "answer tokens / s", "problems / s"):
        table.add_column(name, justify="left" if name == "measure" else "right")
    table.add_row("eval, end to end", f"{r['eval_seconds']:.3f}", "",
                  f"{r['n'] / r['eval_seconds']:,.0f}")
    for name, label in (("kv_cache", "greedy decoding, KV cache"), ("no_cache", "greedy decoding, no cache")):
        d = r["decode"][name]
        table.add_row(label, f"{d['seconds']:.3f}", f"{d['tokens_per_second']:,}", f"{d['problems_per_second']:,}")
    console.print(table)
    console.print(f"eval = parse + encode + decode + score, runs {r['eval_seconds_runs']} s; "
                  f"KV cache speed-up x{r['kv_cache_speedup']}; "
                  f"exact match of this model on them {r['eval_exact_match']:.2%}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sections", nargs="*", metavar="SECTION", help=f"which benchmarks ({', '.join(SECTIONS)}); "
                                                                  "default all")
    p.add_argument("--ckpt", help="checkpoint file or run directory (default: a freshly initialised model)")
    p.add_argument("--n", type=int, default=10_000, help="problems (default 10000)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per figure; the fastest counts (default 3)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.n < 1 or args.repeat < 1:
        p.error("--n and --repeat must be >= 1")
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        p.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    try:
        calc = load_calculator(args.ckpt) if args.ckpt else fresh_calculator()
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    sections = args.sections or list(SECTIONS)
    results = {
        "checkpoint": str(calc.path) if calc.path else None,
        "model": calc.describe() + ("" if calc.path else " (freshly initialised)"),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        **{name: SECTIONS[name](calc, args.n, args.repeat) for name in sections},
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    from rich.console import Console

    console = Console(highlight=False)
    console.print(f"{results['model']}; torch {results['torch']}, {results['threads']} thread(s)")
    if "decode" in results:
        print_decode(results["decode"], console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
