"""Speed benchmarks:  python bench.py [decode] [train] [converge] [analysis] [threads] [collector] [phases] [...]

sections (with none named: decode and train; on CUDA decode, train and converge):
decode    -- (1) evaluation of N random problems end to end, as ``calc.py --eval`` does it: parse the text
             lines, encode, decode greedily with the KV cache, score; (2) greedy decoding throughput of the
             same prompts with and without the KV cache (``Transformer.generate(use_cache=...)``).
train     -- training throughput side by side (benchmarks/train_speed.py): our Lightning path as train.py builds it
             (its per-step callbacks included; no progress bar, attention maps or analysis), the same model in a
             bare loop, a nanoGPT-style reference in a bare loop; each eager and, with --compile, compiled
             (torch.compile; "reduce-overhead" = CUDA graphs on CUDA, "default" elsewhere), the first steps
             (compiling) apart from the steady state; on CUDA also our path at 32-true with full fp32 matmuls,
             with TF32 matmuls and bf16-mixed. Tokens/s, their ratios, MFU against a matmul peak measured on the
             device, at each --batch-sizes.
converge  -- time to 99.9% test exact-match (benchmarks/converge.py), per seed, taking turns: ``python train.py
             seed=S`` (the default recipe; + trainer=gpu on CUDA, + any --override, e.g. experiment=add10) against
             the same command with the previous recipe (optim=adamw, validation every 100 steps, 1,800-step
             cosine) and the nanoGPT-style reference in a bare loop given the default recipe: steps, training
             seconds, whole-command seconds, test exact-match, and the default's exact-match on 10,000 problems
             no run or search has looked at (minutes: only when named, on a CPU).
calc      -- one answer as a whole command (benchmarks/calc_start.py): ``python calc.py --ckpt RUN 123+456`` from a
             fresh interpreter to its exit, as it is and with Lightning imported first (what it cost before calc.py
             stopped importing it), taking turns, --repeat rounds (needs --ckpt).
lab       -- the lab in its page (benchmarks/lab_speed.py): milliseconds from typing a problem to its answer and
             every head's map, in headless Chromium, over min(N, 200) problems; and the page's size.
analysis  -- what looking inside costs: the default ``python train.py`` timed with and without attention
             maps + ablation + pruning (``analysis=none callbacks.attention_maps=null``), the two kinds
             alternating, --repeat runs of each (minutes: each run is a full training run).
threads   -- how many CPU threads a step wants (benchmarks/threads.py): a training step's median time at 1, 2, ...
             threads, quiet and with 2 busy background processes the benchmark starts (and ends) itself, for the
             default model, experiment=add10 and model.d_model=256 (--steps, --warmup, --repeat rounds); the
             default the project chose (training/threads.py) beside it, the load average beside every figure.
threads_runs -- the default ``python train.py`` (analysis=none logger=none) with torch's default of one thread per
             core against the project's default, quiet and under the same load: training seconds (minutes; with
             --steps N, each run trains exactly N steps).
collector -- what Python's cycle collector costs over what train.py and analyse.py import (benchmarks/collector.py):
             one full collection and the interpreter's exit, with those objects frozen as every command freezes
             them (training/collector.py) and not, each in a fresh interpreter, taking turns (--repeat rounds).
phases    -- where a whole ``python train.py`` goes (benchmarks/phases.py): each phase's seconds (startup, build,
             training, test, analysis, report, and the rest outside the run's clock) and share, for the default run
             beside the previous recipe (the overrides that restore it: benchmarks/phases.py PREVIOUS_RECIPE) and
             each cut between them, with what each cut bought, and for the 10-digit preset
             (experiment=add10_speedrun), taking turns (--repeat rounds, + any --override; minutes: only when named).

options:
--device cpu|cuda|mps|auto   where every section runs (default cpu; auto: cuda, else mps, else cpu).
                             A device that is not there is one error line and exit status 2.
--batch-sizes 256,4096       train: batch sizes (default 256 and 4096 on CUDA, 256 elsewhere); the headline
                             figures are those of the first.
--compile / --no-compile     train: the compiled variants too (default: on CUDA yes, elsewhere no -- compiling
                             takes minutes on a small CPU and measured slower there); --compile-mode MODE (implies
                             --compile; default reduce-overhead on CUDA, default elsewhere).
--steps N, --warmup N        train: timed and warm-up steps per round (default 60 + 10 on a CPU, 300 + 20 on a GPU);
                             threads: per thread count and round (default 30 + 5).
--repeat R                   decode: the fastest of R runs; train, threads, collector, phases: R rounds, taking turns,
                             medians; analysis: R runs of each kind (default 3).
--digits D                   train: operand digits of the addition problems timed (default 3; 10 = add10's).
--seeds 0,1,2,3,4            converge: seeds (default 0,1,2,3,4); --override KEY=VALUE
                             adds a train.py override to each converge and phases run (repeatable).
--ckpt P, --n N              decode: checkpoint (default a freshly initialised model), problems (default 10000,
                             at most 1,000,000; every number an option takes is bounded: bench.py BOUNDS).
--json                       one JSON object with every figure.

Without --ckpt, decode uses a freshly initialised default model (3-digit addition, d_model=64, 4 heads,
2 layers): speed does not depend on the weights. On a CPU every training step is timed alone (median of per-step
times); on a GPU, whose kernels run asynchronously, each round's timed steps are one window between two device
synchronisations and nothing inside it waits for the device. torch computes with the project's thread count
(training/threads.py: one thread, or OMP_NUM_THREADS when set); the threads section varies it. Exit status: 0;
1 when a variant or run failed (the others' figures are still reported); 2 bad options or a device that is not
there.
"""

from __future__ import annotations

if __name__ == "__main__":  # first: Ctrl-C while the imports run is one line, not a traceback
    from training.signals import guard_command

    guard_command()

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from data.expressions import read_problems
from data.problems import MAX_DIGITS, ProblemFormat
from data.tokenizer import CharTokenizer
from model.calculator import Calculator
from model.checkpoint import CheckpointError, load_calculator
from model.device import DeviceError, remedy, resolve_device
from model.transformer import Transformer, TransformerConfig
from training import TARGET_ACCURACY
from training.threads import use_threads


def fresh_calculator() -> Calculator:
    torch.manual_seed(0)
    fmt, tokenizer = ProblemFormat(), CharTokenizer()
    net = Transformer(TransformerConfig(vocab_size=tokenizer.vocab_size, block_size=fmt.seq_len))
    return Calculator(net, fmt, tokenizer)


DEVICES = ("cpu", "cuda", "mps", "auto")


def fastest(fn, repeat: int) -> tuple[float, list[float]]:
    """The shortest of ``repeat`` calls of ``fn`` (each returns its results on the CPU, so the device is done)."""
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
    prompts = fmt.prompt_of(calc.encode(read_problems(lines, fmt).problems))  # (n, prompt_len)
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
        "device": str(calc.device),
    }


def bench_analysis(repeat: int, device: torch.device) -> dict:
    """Whole ``python train.py`` runs, with and without analysis, alternating so both see the same machine."""
    from benchmarks.converge import timed_train
    from benchmarks.train_speed import device_overrides

    on_device = device_overrides(device)
    variants = {
        "with_analysis": on_device,
        "without_analysis": [*on_device, "analysis=none", "callbacks.attention_maps=null"],
    }
    walls: dict[str, list[float]] = {name: [] for name in variants}
    analysis_seconds, steps = [], {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            for name, overrides in variants.items():
                seconds, done, results = timed_train(overrides, Path(tmp) / f"{name}{i}")
                walls[name].append(seconds)
                if done.returncode != 0:
                    raise RuntimeError(f"train.py failed: {done.stderr.strip().splitlines()[-1:]}")
                steps[name].append(results["steps"])
                if name == "with_analysis":
                    analysis_seconds.append(results["analysis_seconds"])
    median = {name: sorted(times)[len(times) // 2] for name, times in walls.items()}
    return {
        "command": f"python train.py {' '.join(on_device)}  vs  the same + analysis=none callbacks.attention_maps=null",
        "runs_each": repeat,
        "wall_seconds": {name: [round(t, 2) for t in times] for name, times in walls.items()},
        "steps": steps,
        "median_wall_seconds": {name: round(t, 2) for name, t in median.items()},
        "overhead": round(median["with_analysis"] / median["without_analysis"] - 1, 4),
        "analysis_seconds_in_process": analysis_seconds,
    }


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def bench_training(args, device: torch.device) -> dict:
    from benchmarks.train_speed import bench_train

    cuda = device.type == "cuda"
    compiled = args.compile if args.compile is not None else cuda or args.compile_mode is not None
    return bench_train(
        rounds=args.repeat,
        steps=args.steps,
        warmup=args.warmup,
        digits=args.digits,
        device=device,
        batch_sizes=args.batch_sizes or ([256, 4096] if cuda else [256]),
        compile_mode=(args.compile_mode or ("reduce-overhead" if cuda else "default")) if compiled else None,
        progress=progress,
    )


def bench_converge(device: torch.device, seeds: list[int], overrides: list[str]) -> dict:
    from benchmarks.converge import bench_converge as converge

    return converge(device, seeds, overrides, TARGET_ACCURACY, say=progress)


def bench_thread_counts(args) -> dict:
    from benchmarks.threads import bench_threads

    steps, warmup = args.steps or 30, args.warmup or 5
    return bench_threads(steps=steps, warmup=warmup, repeat=args.repeat, say=progress)


def bench_threads_runs(args) -> dict:
    from benchmarks.threads import bench_default_run

    return bench_default_run(steps=args.steps, say=progress)


SECTIONS = {  # name -> (calculator, command-line args, device) -> figures
    "decode": lambda calc, args, device: bench_decode(calc.to(device), args.n, args.repeat),
    "train": lambda calc, args, device: bench_training(args, device),
    "converge": lambda calc, args, device: bench_converge(device, args.seeds, args.override),
    "analysis": lambda calc, args, device: bench_analysis(args.repeat, device),
    "lab": lambda calc, args, device: bench_lab(calc, min(args.n, 200)),
    "threads": lambda calc, args, device: bench_thread_counts(args),
    "threads_runs": lambda calc, args, device: bench_threads_runs(args),
    "collector": lambda calc, args, device: bench_collector(args.repeat),
    "phases": lambda calc, args, device: bench_run_phases(args.repeat, args.override),
    "calc": lambda calc, args, device: bench_calc_command(calc, args.repeat),
}
# where a section's figures go in the results, when not under its own name ("threads" is the count the run used)
RESULT_KEYS = {"threads": "step_time_by_threads"}


def bench_collector(repeat: int) -> dict:
    from benchmarks.collector import bench_collector as collector

    return collector(repeat, say=progress)


def bench_run_phases(repeat: int, overrides: list[str]) -> dict:
    from benchmarks.phases import bench_phases

    return bench_phases(repeat, overrides, say=progress)


def bench_calc_command(calc: Calculator, repeat: int) -> dict:
    from benchmarks.calc_start import bench_calc

    if calc.path is None:
        return {"errors": ["calc: time it on a trained run: python bench.py calc --ckpt runs/<run>"]}
    return bench_calc(str(calc.path), calc.fmt.digits, repeat, say=progress)


def print_calc(r: dict, console) -> None:
    from rich.table import Table

    if r.get("errors"):
        console.print(r["errors"][0])
        return
    table = Table(title=f"calc: python calc.py --ckpt RUN {r['problem']}, the whole command", title_justify="left")
    for name in ("command", "median s", "runs"):
        table.add_column(name, justify="left" if name == "command" else "right")
    for kind, median in r["median_s"].items():
        table.add_row(kind, f"{median:.2f}", str(len(r["seconds"][kind])))
    console.print(table)
    console.print(f"calc.py is {r['speedup']:.1f}x faster than with Lightning imported first; answers: {r['answers']}")


def bench_lab(calc: Calculator, n: int) -> dict:
    from benchmarks.lab_speed import bench_lab as lab

    return lab(calc, n)


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


PATH_LABELS = {
    "lightning": "ours: train.py's Lightning path",
    "bare": "ours: bare PyTorch loop",
    "nanogpt": "nanoGPT-style ref., bare loop",
}


def precision_label(v: dict) -> str:
    """fp32 (on a CPU, or full fp32 matmuls on CUDA), TF32 (fp32 with TensorFloat-32 matmuls) or bf16-mixed."""
    if v["precision"].startswith("bf16"):
        return v["precision"]
    return {"high": "TF32", "medium": "fp32, bf16 matmuls"}.get(v["matmul_precision"], "fp32")


def print_train(r: dict, console) -> None:
    from rich.table import Table

    console.print(f"train: {r['setup']}")
    for batch, b in r["by_batch_size"].items():
        warmup = r["warmup"]
        table = Table(title=f"batch {int(batch):,} ({b['tokens_per_step']:,} tokens a step)", title_justify="left")
        columns = ("path", "variant", "ms / step", "tokens / s", "x ref.", "MFU")
        for name in (*columns, f"first {warmup} steps, s"):
            table.add_column(name, justify="left" if name in columns[:2] else "right")
        for v in b["variants"].values():
            row = [PATH_LABELS[v["path"]], f"{'compiled' if v['compile'] else 'eager'}, {precision_label(v)}"]
            if "error" in v:
                table.add_row(*row, f"[red]failed: {v['error']}[/red]", "", "", "", "")
                continue
            table.add_row(
                *row,
                f"{v['ms_per_step']:.3f}",
                f"{v['tokens_per_second']:,}",
                f"{v['over_reference_eager']:.3f}" if v["over_reference_eager"] is not None else "",
                f"{v['mfu']:.1%}" if v["mfu"] is not None else "",
                f"{v['first_steps_seconds']:.2f}" if v["first_steps_seconds"] is not None else "",
            )
        console.print(table)
        compiled = {n: v["compiled"] for n, v in b["variants"].items() if "compiled" in v}
        if compiled:
            console.print(
                "compiled: "
                + "; ".join(
                    f"{n} {c['graphs']} graph(s), {c['graph_breaks']} graph break(s), "
                    f"{c['cudagraph_skips']} CUDA-graph skip(s), start-up {b['variants'][n]['startup_seconds']:.1f} s"
                    for n, c in compiled.items()
                )
            )
        ratios = {k: b[k] for k in ("lightning_over_reference_compiled", "lightning_compiled_over_reference_compiled")}
        if any(v is not None for v in ratios.values()):
            console.print(", ".join(f"{k} {v}" for k, v in ratios.items() if v is not None))
    compiled = f"compiled = torch.compile(mode={r['compile_mode']!r}); " if r["compile_mode"] else ""
    tf32 = "TF32 = fp32 with TensorFloat-32 matmuls; " if r["matmul_peaks_gflops"].keys() - {"fp32"} else ""
    console.print(
        f"{compiled}{tf32}x ref. = tokens/s over the eager reference's at that batch; first {r['warmup']} steps = "
        "start-up, compiling and CUDA-graph capture included, then the steady state"
    )
    console.print(
        f"lightning_over_bare {r['lightning_over_bare']}, model_over_nanogpt {r['model_over_nanogpt']}, "
        f"lightning_over_reference_eager {r['lightning_over_reference_eager']} (> 1 = ours faster; batch "
        f"{r['batch_size']})"
    )
    if r["mfu"] is not None:
        console.print(
            f"{r['flops_per_token']:,} FLOPs/token (reference {r['reference_flops_per_token']:,}) x "
            f"{r['tokens_per_second']:,} tokens/s over a {r['matmul_peak_gflops']:,} GFLOP/s "
            f"{r['by_batch_size'][str(r['batch_size'])]['variants']['lightning']['mfu_against']} matmul peak "
            f"= MFU {r['mfu']:.1%}"
            + (
                "; peaks measured: " + ", ".join(f"{k} {v:,}" for k, v in r["matmul_peaks_gflops"].items())
                if len(r["matmul_peaks_gflops"]) > 1
                else ""
            )
        )
    if r["precision_by_measurement"]:
        console.print(
            "fastest precision of our path: "
            + "; ".join(
                f"batch {b}: {precision_label(p)}" for b, p in r["precision_by_measurement"].items() if p is not None
            )
        )
    if r["matmul_share_of_step"] is not None:
        busy = r["device_busy_share_of_step"]
        console.print(
            f"where the time goes: matrix multiplies take {r['matmul_share_of_step']:.0%} of a bare step and run at "
            f"{r['matmul_gflops_in_step']:,} GFLOP/s"
            + (
                f"; the GPU is busy {busy:.0%} of a step (the rest it waits for kernels to be launched)"
                if busy is not None
                else "; the rest is attention kernels, LayerNorm, GELU and the optimizer"
            )
        )
    memory = f"; peak GPU memory {r['peak_device_memory_mb']:,} MB" if r["peak_device_memory_mb"] is not None else ""
    console.print(
        f"data {r['data_problems_per_second']:,} problems/s; peak RSS {r['peak_rss_mb']} MB{memory}"
        if r["data_problems_per_second"] is not None
        else f"peak RSS {r['peak_rss_mb']} MB{memory}"
    )
    console.print(f"left out of our path: {r['left_out']}")
    for name, error in r["errors"].items():
        console.print(f"[red]failed: {name}: {error}[/red]")


def print_lab(r: dict, console) -> None:
    from rich.table import Table

    table = Table(
        title=f"lab: keystroke to answer and {r['heads']} heads' maps, headless Chromium", title_justify="left"
    )
    for name in ("model", "problems typed", "median ms", "90th percentile ms", "max ms", "lab page"):
        table.add_column(name, justify="left" if name == "model" else "right")
    table.add_row(r["model"], str(r["problems"]), f"{r['median_ms']:.1f}", f"{r['p90_ms']:.1f}", f"{r['max_ms']:.1f}",
                  f"{r['page_bytes'] / 1e6:.2f} MB")  # fmt: skip
    console.print(table)


def print_converge(r: dict, console) -> None:
    from rich.table import Table

    table = Table(
        title=f"converge: steps and seconds to {r['target']:.1%} test exact-match, on {r['device']}",
        title_justify="left",
    )
    columns = ("recipe", "seed", "steps", "train s", "whole command s", "test exact-match", "never-seen exact-match")
    for name in columns:
        table.add_column(name, justify="left" if name == "recipe" else "right")
    for name, v in r["variants"].items():
        for run in v["runs"]:
            if "error" in run:
                table.add_row(name, str(run["seed"]), f"[red]failed: {run['error']}[/red]")
                continue
            unseen = run.get("unseen_exact_match")
            table.add_row(
                name,
                str(run["seed"]),
                f"{run['steps']:,}" + ("" if run["reached"] else " (missed)"),
                f"{run['train_seconds']:.1f}",
                f"{run['wall_seconds']:.1f}" if "wall_seconds" in run else "",
                f"{run['test_exact_match']:.2%}",
                f"{unseen:.2%}" if unseen is not None else "",
            )
        wall = v["median_wall_seconds"]
        table.add_row(
            f"[bold]{name}: median[/bold]",
            "",
            f"{v['median_steps']}",
            f"{v['median_train_seconds']:.1f}" if v["median_train_seconds"] is not None else "",
            f"{wall:.1f}" if wall is not None else "",
            f"{v['reached']}/{len(v['runs'])} reached",
            "",
            end_section=True,
        )
    console.print(table)
    for name, v in r["variants"].items():
        console.print(f"{name}: {v['command']}")
    if r["steps_ratio"] is not None:
        console.print(
            f"default over previous (medians): steps x{r['steps_ratio']}, "
            f"training seconds x{r['train_seconds_ratio']}, whole command x{r['wall_seconds_ratio']}"
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


def print_threads(r: dict, console) -> None:
    from rich.table import Table

    table = Table(
        title=f"threads: a training step's median ms on {r['cores']} cores, quiet and with {r['background_load']}",
        title_justify="left",
    )
    for name in ("model", "parameters", "load", *(f"{t} thread{'s' * (t > 1)}" for t in r["thread_counts"]),
                 "load average"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("model", "load") else "right")
    for model in dict.fromkeys(row["model"] for row in r["rows"]):
        for load in dict.fromkeys(row["load"] for row in r["rows"]):
            rows = [row for row in r["rows"] if (row["model"], row["load"]) == (model, load)]
            cells = [f"{row['ms_per_step']:.1f}" + (f" (x{row['over_one_thread']})" if row["threads"] > 1 else "")
                     for row in rows]  # fmt: skip
            loads = " -> ".join(f"{a:.1f}" for a in rows[0]["load_average"] if a is not None)
            table.add_row(model, f"{rows[0]['parameters']:,}", load, *cells, loads)
    console.print(table)
    console.print(f"default: {r['default_threads']} thread ({r['rule']})")


def print_collector(r: dict, console) -> None:
    from rich.table import Table

    table = Table(
        title=f"collector: over what each command imports, medians of {r['repeat']} (frozen: training/collector.py)",
        title_justify="left",
    )
    for name in ("command", "objects scanned", "a full collection, ms", "frozen, ms", "exit, ms", "frozen, ms"):
        table.add_column(name, justify="left" if name == "command" else "right")
    for row in r["rows"]:
        table.add_row(
            row["command"], f"{row['scanned']:,} -> {row['scanned_frozen']:,}", f"{row['collect_ms']:.1f}",
            f"{row['collect_ms_frozen']:.1f}", f"{row['exit_ms']:,}", f"{row['exit_ms_frozen']:,}",
        )  # fmt: skip
    console.print(table)


def print_threads_runs(r: dict, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"threads: {escape(r['command'])}, training seconds", title_justify="left")
    for name in ("threads", "load", "training s", "x quiet", "steps", "load average"):
        table.add_column(name, justify="left" if name in ("threads", "load") else "right")
    for row in r["rows"]:
        loads = " -> ".join(f"{a:.1f}" for a in row["load_average"] if a is not None)
        table.add_row(row["run"], row["load"], f"{row['train_seconds']:.1f}", f"{row['over_quiet']:.2f}",
                      str(row["steps"]), loads)  # fmt: skip
    console.print(table)


def print_phases(r: dict, console) -> None:
    from rich.table import Table

    from benchmarks.phases import PHASES

    table = Table(
        title=f"phases: a whole python train.py, seconds (share), medians of {r['rounds']} round(s) taking turns",
        title_justify="left",
    )
    for name in ("run", *PHASES, "outside", "whole", "steps"):
        table.add_column(name, justify="left" if name == "run" else "right", no_wrap=name == "run")
    for name, v in r["runs"].items():
        cells = [f"{v['seconds'][p]:.1f} ({v['share'][p]:.0%})" for p in (*PHASES, "outside")]
        table.add_row(name, *cells, f"{v['whole_seconds']:.1f}", ", ".join(map(str, v["steps"])))
    console.print(table)
    for name, v in r["runs"].items():
        console.print(f"{name}: {v['command']}")
    console.print("outside = the interpreter's start before the run's clock and its exit; whole = the command's wall s")
    if r.get("cuts"):
        cuts = Table(title="what each cut bought: seconds saved, the rung before it less the rung with it",
                     title_justify="left")  # fmt: skip
        for name in ("cut", "whole command s", "training s", "undone by"):
            cuts.add_column(name, justify="right" if name.endswith(" s") else "left")
        seconds = lambda s: "—" if s is None else f"{s:.1f}"  # noqa: E731
        for c in r["cuts"]:
            cuts.add_row(c["cut"], seconds(c["whole_seconds_saved"]), seconds(c["training_seconds_saved"]),
                         c["undone_by"])  # fmt: skip
        console.print(cuts)
    for name, error in r["errors"].items():
        console.print(f"[red]failed: {name}: {error}[/red]")


def numbers(text: str, low: int) -> list[int]:
    """'256,4096' -> [256, 4096] (argparse type): whole numbers >= low, comma-separated."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v < low for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated whole numbers >= {low}, e.g. 256,4096")
    return values


# Each number an option takes, bounded: past these a benchmark exhausts the memory or never ends, with a traceback
# (decode --n 100000000000 tried to allocate 800 GB). The train section's batch sizes are train.py's to bound:
# training/limits.py's check of the memory a run needs, on the config each is timed with (batch_sizes_refused).
BOUNDS = {  # option -> (lowest, highest)
    "n": (1, 1_000_000),  # problems, each held as a line of text (as many lines as calc.py --eval reads)
    "repeat": (1, 100),
    "digits": (1, MAX_DIGITS["+"]),  # the addition problems the train section times
    "steps": (1, 1_000_000),
    "warmup": (1, 1_000_000),
}


def out_of_bounds(args) -> str | None:
    """The first option whose number is out of BOUNDS, as an error message, else None."""
    for name, (low, high) in BOUNDS.items():
        value = getattr(args, name)
        if value is not None and not low <= value <= high:
            return f"--{name} {value}: use a whole number in [{low:,}, {high:,}]"
    return None


def batch_sizes_refused(args, device: torch.device) -> str | None:
    """train.py's own refusal (training/limits.py: the memory the run needs) of a batch size the train section
    would time, on the config it would be timed with; None when each fits."""
    from benchmarks.train_speed import compose, device_overrides
    from training.limits import check_sizes

    with tempfile.TemporaryDirectory() as workdir:
        for batch_size in args.batch_sizes or []:
            overrides = [*device_overrides(device), f"data.digits={args.digits}", f"data.batch_size={batch_size}"]
            refused = check_sizes(compose(overrides, Path(workdir) / "run"))
            if refused:
                return f"--batch-sizes {batch_size}: {refused.split(': ', 1)[1]}"
    return None


def main(argv: list[str] | None = None) -> int:
    from training.compiling import COMPILE_MODES

    summary, details = __doc__.split("\n\n", 1)
    p = argparse.ArgumentParser(
        description=summary, epilog=details, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "sections",
        nargs="*",
        metavar="SECTION",
        help=f"which benchmarks ({', '.join(SECTIONS)}); default: decode and train (on CUDA also converge)",
    )
    p.add_argument("--device", choices=DEVICES, default="cpu", help="where to run (default cpu; auto: cuda, mps, cpu)")
    p.add_argument("--ckpt", help="checkpoint file or run directory (default: a freshly initialised model)")
    p.add_argument("--n", type=int, default=10_000, help="problems (default 10000)")
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="decode: fastest of R runs; train, collector, phases: R rounds; analysis: R runs (default 3)",
    )
    p.add_argument(
        "--digits",
        type=int,
        default=3,
        help="train section: operand digits of the addition problems timed (default 3; 10 = add10)",
    )
    p.add_argument(
        "--batch-sizes",
        type=lambda t: numbers(t, 1),
        metavar="B,B",
        help="train: batch sizes, the first one's figures the headline (default 256,4096 on CUDA, 256 elsewhere)",
    )
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="train: also time torch.compile'd variants (default: on CUDA yes, elsewhere no)",
    )
    p.add_argument(
        "--compile-mode",
        choices=[m for m in COMPILE_MODES if m],
        help="train: the torch.compile mode, implies --compile (default reduce-overhead on CUDA, default elsewhere)",
    )
    p.add_argument(
        "--steps", type=int, help="train: timed steps per round (default 60 on a CPU, 300 on a GPU; threads: 30)"
    )
    p.add_argument(
        "--warmup", type=int, help="train: warm-up steps per round (default 10 on a CPU, 20 on a GPU; threads: 5)"
    )
    p.add_argument(
        "--seeds",
        type=lambda t: numbers(t, 0),
        metavar="S,S",
        help="converge: seeds, one run of each recipe each (default 0,1,2,3,4)",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="converge, phases: one more train.py override for every run (repeatable), e.g. seed=1",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if out_of_bounds(args):  # one line, as every refusal of the project's commands
        print(f"error: {out_of_bounds(args)}", file=sys.stderr)
        return 2
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        p.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    use_threads()  # the project's thread count (training/threads.py), as every command
    try:  # before anything is loaded: a missing GPU is said at once
        device = resolve_device(args.device)
    except DeviceError as e:
        print(f"error: --device {args.device}: {e.why}; {remedy(args.device, '--device cpu')}", file=sys.stderr)
        return 2
    if args.seeds is None:
        args.seeds = [0, 1, 2, 3, 4]
    too_big = batch_sizes_refused(args, device) if "train" in (args.sections or ["train"]) else None
    if too_big:
        print(f"error: {too_big}", file=sys.stderr)
        return 2
    try:
        calc = load_calculator(args.ckpt) if args.ckpt else fresh_calculator()
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # 'analysis' trains several models, 'converge' several long ones (minutes each on a CPU): only when asked there
    sections = args.sections or ["decode", "train", *(["converge"] if device.type == "cuda" else [])]
    results = {
        "checkpoint": str(calc.path) if calc.path else None,
        "model": calc.describe() + ("" if calc.path else " (freshly initialised)"),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": str(device),
    }
    # Lightning and torch.compile may print: keep stdout for the one JSON object
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        for name in sections:
            results[RESULT_KEYS.get(name, name)] = SECTIONS[name](calc, args, device)
    if "train" in results:  # the headline figures, at the top level
        headline = ("lightning_over_bare", "model_over_nanogpt", "mfu", "tokens_per_second")
        headline += ("lightning_over_reference_eager", "lightning_over_reference_compiled")
        results |= {k: results["train"][k] for k in headline}
    failed = any(results.get(name, {}).get("errors") for name in ("train", "converge", "phases", "calc"))
    if args.json:
        print(json.dumps(results, indent=2))
        return 1 if failed else 0
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:  # a pipe or a log: the train tables' columns need more than 80 characters
        console.width = max(console.width, 120)
    console.print(f"{results['model']}; torch {results['torch']}, {results['threads']} thread(s), on {device}")
    if "decode" in results:
        print_decode(results["decode"], console)
    if "train" in results:
        print_train(results["train"], console)
    if "converge" in results:
        print_converge(results["converge"], console)
    if "analysis" in results:
        print_analysis(results["analysis"], console)
    if "lab" in results:
        print_lab(results["lab"], console)
    if "calc" in results:
        print_calc(results["calc"], console)
    if "step_time_by_threads" in results:
        print_threads(results["step_time_by_threads"], console)
    if "threads_runs" in results:
        print_threads_runs(results["threads_runs"], console)
    if "collector" in results:
        print_collector(results["collector"], console)
    if "phases" in results:
        print_phases(results["phases"], console)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
