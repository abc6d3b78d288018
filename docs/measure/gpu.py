"""On a GPU: the documented GPU commands on a real card -- ``python train.py trainer=gpu experiment=add10`` on seeds
0-2 (each then ``python verify.py``), the default ``python train.py trainer=gpu``, ``python bench.py train --device
cuda`` and ``python -m pytest -m gpu`` -- one after another, so the timings do not share the card.

Needs an NVIDIA GPU and the CUDA build of torch: ``python docs/regenerate.py --only gpu`` on such a machine writes
docs/measured/gpu.json (the card, the driver and torch with it); every other section runs on the CPU machine of
docs/results.md. A part that fails is recorded as its one-line error and the other parts still run. GPU time is
often borrowed and short: ``GPU_PARTS=tests,bench python docs/regenerate.py --only gpu`` measures only those parts
again and keeps the others from docs/measured/gpu.json; each part says at which commit and on which day it ran.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from .common import MEASURED, ROOT, bench, commit, not_measured, pct, results, run, secs, train, verify

COMMAND = (
    "python train.py trainer=gpu experiment=add10 seed=S (S = 0, 1, 2) + python verify.py <run>; "
    "python train.py trainer=gpu; python train.py (the same machine's CPU); "
    "python bench.py train --device cuda --batch-sizes 256; python -m pytest -m gpu"
)
COST = "~7 min on one H100 (needs an NVIDIA GPU; skipped without one)"
NEEDS_GPU = True  # docs/regenerate.py runs it only where CUDA is, and keeps the CPU machine's line in machine.json
SEEDS = (0, 1, 2)
BENCH = ("train", "--device", "cuda", "--batch-sizes", "256", "--repeat", "3")
TIMEOUT = 300  # seconds for any one command: a hang is a recorded failure, not a lost session


def card() -> dict:
    """The GPU, its driver, and the torch and CUDA that ran on it."""
    import torch

    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
    )
    return {
        "gpu": torch.cuda.get_device_name(0),
        "memory_gb": round(torch.cuda.get_device_properties(0).total_memory / 2**30),
        "driver": smi.stdout.strip() or None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def attempt(part):
    """``part()``, or {"error": its one line} when a command failed or ran past TIMEOUT."""
    try:
        return part()
    except SystemExit as stopped:  # common.run's way to stop on a failed command: its line, then the output's end
        lines = [line for line in str(stopped).splitlines() if line.strip()]
        return {"error": " ... ".join(dict.fromkeys([lines[0][:200], lines[-1][:300]]))}


def trained(scratch: Path, name: str, *overrides: str, trainer: str = "trainer=gpu") -> dict:
    """``python train.py trainer=gpu OVERRIDES`` (``trainer=""``: the CPU's default): its figures, timed as a whole
    command."""
    out = scratch / "gpu" / name
    ran = train(scratch, *filter(None, [trainer, *overrides]), f"hydra.run.dir={out}", timeout=TIMEOUT)
    r = results(out)
    keep = ("steps", "train_seconds", "test_exact_match", "n_test", "device", "precision", "compile", "status")
    keep += ("phases", "maps_seconds", "analysis_seconds")  # where a whole command's seconds went
    return (
        {"command": " ".join(["python train.py", *filter(None, [trainer, *overrides])]), "whole_seconds": ran.seconds}
        | {key: r.get(key) for key in keep}
        | {"run_dir": str(out)}
    )


def add10(scratch: Path, seed: int) -> dict:
    run_figures = trained(scratch, f"add10_seed{seed}", "experiment=add10", f"seed={seed}")
    return run_figures | {"seed": seed, "verify": verify(Path(run_figures["run_dir"]), scratch)}


def gpu_tests(scratch: Path) -> dict:
    """``python -m pytest -m gpu``: how many passed, failed and were skipped, and the failures' names."""
    workers = ["-n", "4"] if importlib.util.find_spec("xdist") else []  # pytest-xdist, where it is installed
    ran = run(["-m", "pytest", "-m", "gpu", "-q", "-rfE", *workers], ROOT, ok=(0, 1), timeout=600)
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", ran.stdout.splitlines()[-1])}
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)(?: - (.*))?$", ran.stdout, re.M)  # -rfE: name - its reason
    reasons = {name: why[:300] for name, why in failed if why}  # what broke, for whoever fixes it without the card
    return {
        "command": "python -m pytest -m gpu",
        "seconds": ran.seconds,
        **counts,
        "failures": [n for n, _ in failed],
    } | ({"reasons": reasons} if reasons else {})


def measure(scratch: Path) -> dict:
    """On an NVIDIA GPU: add10 on seeds 0-2 with verify.py, the default run, bench.py train and pytest -m gpu."""
    import torch

    if not torch.cuda.is_available():
        sys.exit("error: the gpu section needs an NVIDIA GPU and the CUDA build of torch; run it on such a machine")
    (scratch / "gpu").mkdir(parents=True, exist_ok=True)
    kept = MEASURED / "gpu.json"
    facts: dict = json.loads(kept.read_text()) if kept.is_file() else {}
    facts |= {"command": COMMAND, "card": card()}
    parts = {
        "add10": lambda: [attempt(lambda s=s: add10(scratch, s)) for s in SEEDS],
        "default": lambda: attempt(lambda: trained(scratch, "default")),
        # the same task on the same machine's CPU cores, right after: the GPU's run side by side with the CPU's
        "cpu": lambda: attempt(lambda: trained(scratch, "default_cpu", trainer="")),
        "bench": lambda: attempt(lambda: bench(scratch, *BENCH, ok=(0, 1), timeout=TIMEOUT)["train"]),
        "tests": lambda: attempt(lambda: gpu_tests(scratch)),
    }
    chosen = os.environ.get("GPU_PARTS", ",".join(parts)).split(",")
    if set(chosen) - set(parts):
        sys.exit(f"error: GPU_PARTS={','.join(chosen)}: each must be one of {', '.join(parts)}")
    stamp = {"date": dt.date.today().isoformat(), "commit": commit()}
    for name in chosen:
        facts[name] = parts[name]()
        facts.setdefault("measured", {})[name] = stamp
        # so far, in the scratch directory: a session on a borrowed card that runs out of time keeps what it got
        (scratch / "gpu" / "so_far.json").write_text(json.dumps(facts, indent=2))
    for r in [*facts.get("add10", []), facts.get("default", {}), facts.get("cpu", {})]:
        r.pop("run_dir", None)
    return facts


# ---- the blocks: docs/performance.md's "On a GPU" and the README's line -----------------------------------
def card_line(c: dict) -> str:
    return (
        f"one {c['gpu']} ({c['memory_gb']} GB, driver {c['driver']}), {c['cores']} CPU cores, torch {c['torch']} "
        f"(CUDA {c['cuda']}), Python {c['python']}"
    )


def failed(x: dict) -> str | None:
    return f"failed: {x['error']}" if "error" in x else None


def block_gpu(m: dict) -> str:
    """What the card measured: add10 seed by seed, the default run, the speed side by side and the GPU tests."""
    x = m.get("gpu")
    if not x:
        return not_measured("gpu")
    lines = [
        f"Measured on {card_line(x['card'])}, by `python docs/regenerate.py --only gpu`, which runs the commands "
        f"below ([`measured/gpu.json`](measured/gpu.json)): {when_measured(x)}.",
        "",
        "| command | steps | training | whole command | test exact-match | `verify.py` |",
        "|---|---|---|---|---|---|",
    ]
    for r in [*x["add10"], x["default"], *([x["cpu"]] if "cpu" in x else [])]:
        if failed(r):
            lines.append(f"| | {failed(r)} | | | | |")
            continue
        verdict = ("pass" if r["verify"]["passed"] else "fails") if "verify" in r else "—"
        where = " on the same machine's CPU" if r is x.get("cpu") else ""
        lines.append(
            f"| `{r['command']}`{where} | {r['steps']:,} | {r['train_seconds']:.1f} s | {r['whole_seconds']:.1f} s | "
            f"{pct(r['test_exact_match'])} of {r['n_test']:,} | {verdict} |"
        )
    lines += ["", *bench_lines(x["bench"]), "", tests_line(x.get("tests"))]
    return "\n".join(lines)


def when_measured(x: dict) -> str:
    """Which parts ran on which day, at which commit (GPU_PARTS measures some again and keeps the others)."""
    by_stamp: dict[tuple, list[str]] = {}
    for part, stamp in x.get("measured", {}).items():
        by_stamp.setdefault((stamp["date"], stamp["commit"]), []).append(PART_NAMES[part])
    return "; ".join(f"{' and '.join(names)} on {date} at commit {at}" for (date, at), names in by_stamp.items())


PART_NAMES = {
    "add10": "add10",
    "default": "the default run",
    "cpu": "the CPU's default run",
    "bench": "`bench.py`",
    "tests": "the tests",
}


def bench_lines(b: dict) -> list[str]:
    """bench.py train's table at batch 256: every variant's tokens/s and its ratio to the eager reference."""
    if failed(b):
        return [f"`python bench.py train --device cuda`: {failed(b)}"]
    batch = b["by_batch_size"][str(b["batch_size"])]
    lines = [
        f"`python bench.py train --device cuda --batch-sizes 256` (batch {b['batch_size']}, "
        f"{batch['tokens_per_step']:,} tokens a step; medians of {b['rounds']} rounds of {b['steps']} steps):",
        "",
        "| path | variant | ms / step | tokens / s | × eager reference |",
        "|---|---|---|---|---|",
    ]
    for v in batch["variants"].values():
        kind = f"{'compiled' if v['compile'] else 'eager'}, {precision(v)}"
        if "error" in v:
            lines.append(f"| {v['path']} | {kind} | failed: {v['error']} | | |")
            continue
        ratio = f"{v['over_reference_eager']:.2f}" if v["over_reference_eager"] is not None else ""
        lines.append(f"| {v['path']} | {kind} | {v['ms_per_step']:.3f} | {v['tokens_per_second']:,} | {ratio} |")
    fastest = b["precision_by_measurement"].get(str(b["batch_size"]))
    if fastest:
        lines += ["", f"Fastest precision of our path, measured: {precision(fastest)}."]
    if b.get("device_busy_share_of_step") is not None:
        lines[-1] += (
            f" The GPU is busy {b['device_busy_share_of_step']:.0%} of a bare eager step (matrix multiplies "
            f"{b['matmul_share_of_step']:.0%}): the rest of the step it waits for the host to launch kernels."
        )
    return lines


def precision(v: dict) -> str:
    if v["precision"].startswith("bf16"):
        return "bf16-mixed"
    return "TF32" if v.get("matmul_precision") in ("high", "medium") else "fp32"


def tests_line(t: dict | None) -> str:
    if t is None:
        return (
            "`python -m pytest -m gpu`: not run on a card yet (`GPU_PARTS=tests python docs/regenerate.py --only gpu`)."
        )
    if failed(t):
        return f"`python -m pytest -m gpu`: {failed(t)}"
    counts = ", ".join(f"{t[k]} {k}" for k in ("passed", "failed", "error", "skipped") if t.get(k))
    names = f" ({', '.join(f'`{n}`' for n in t['failures'])})" if t["failures"] else ""
    return f"`python -m pytest -m gpu`: {counts}{names}, in {secs(t['seconds'])}."


def block_gpu_summary(m: dict) -> str:
    """The README's sentence: the card, add10's seeds and the default run, with the date."""
    x = m.get("gpu")
    if not x:
        return not_measured("gpu")
    ok = [r for r in x["add10"] if not failed(r)]
    if not ok or failed(x["default"]):
        return f"On {x['card']['gpu']}: a part failed; see [on a GPU](docs/performance.md#on-a-gpu)."
    worst = max(r["whole_seconds"] for r in ok)
    low = min(r["test_exact_match"] for r in ok)
    passed = sum(r["verify"]["passed"] for r in ok)
    d = x["default"]
    return (
        f"On one {x['card']['gpu']} ({x['measured']['add10']['date']}): `experiment=add10` seeds "
        f"{', '.join(str(r['seed']) for r in ok)} at ≥ {pct(low)} test exact-match, {passed} of {len(ok)} passing "
        f"`verify.py`, each whole command ≤ {worst:.0f} s; the default task in {d['whole_seconds']:.0f} s "
        f"({pct(d['test_exact_match'])})."
    )


BLOCKS = {"gpu": block_gpu, "gpu_summary": block_gpu_summary}
