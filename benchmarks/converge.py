"""Time to target accuracy, side by side: ``python bench.py converge``.

For each seed, taking turns so that a noisy neighbour slows them alike:

default    ``python train.py seed=S`` (+ the run's overrides) as a user runs it: the whole command's wall seconds,
           and from its results.json the steps, training seconds, per-phase seconds and test exact-match; and the
           exact-match of its best checkpoint on problems the project has never seen (:func:`unseen_exact_match`).
previous   the same command with the recipe before issue 29 (:data:`PREVIOUS_RECIPE`: AdamW for every weight,
           validation every 100 steps, cosine over 1,800 steps).
reference  the nanoGPT-style reference model (model/reference.py) in a bare PyTorch loop given the default's recipe
           (the same optimizer and schedule, gradient clipping, data stream, validation interval and stop) --
           in this process, so no whole-command seconds.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from model.reference import RefGPT, nanogpt_init
from storage.rundir import RunDir

ROOT = Path(__file__).resolve().parent.parent
# the recipe the default run had before issue 29 (configs at that commit: optim=adamw, trainer=cpu, batches of 256
# without hard cases, the stop at the first perfect validation)
PREVIOUS_RECIPE = (
    "optim=adamw", "trainer.max_steps=1800", "trainer.val_check_interval=100",
    "data.batch_size=256", "data.hard_share=0.0", "data.hard_fade_steps=0", "target_loss=null",
)  # fmt: skip
VARIANTS = ("default", "previous", "reference")
UNSEEN = 10_000  # problems in the never-seen set


def timed_train(overrides: list[str], run_dir: Path) -> tuple[float, subprocess.CompletedProcess, dict | None]:
    """``python train.py OVERRIDES`` as a user runs it, its run directory at ``run_dir``: (the whole command's wall
    seconds, the finished process, its results.json or None when it wrote none)."""
    argv = [sys.executable, str(ROOT / "train.py"), *overrides, f"hydra.run.dir={run_dir}"]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    results = RunDir(run_dir).results
    return seconds, done, json.loads(results.read_text()) if results.exists() else None


def failure(done: subprocess.CompletedProcess) -> str:
    said = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
    return f"train.py exit status {done.returncode}: {said[:300]}"


@torch.no_grad()
def unseen_problems(datamodule, steps: int, n: int = UNSEEN, device: torch.device | str = "cpu") -> torch.Tensor:
    """``n`` distinct problems (encoded, on the CPU) that no part of the project has looked at for this run: from the
    training split (so in no validation or test set of any seed), none of them in the ``steps`` batches the run
    trained on -- drawn again on the run's ``device``, as a CUDA generator draws other numbers than a CPU one from
    the same seed -- and drawn with a generator of their own."""
    stream = iter(datamodule.training_stream(device))
    trained = torch.cat([next(stream).cpu() for _ in range(steps)]) if steps else None
    generator = torch.Generator().manual_seed(2_029_029)
    candidates = datamodule.data.encoder.encode(*datamodule.data.sampler.sample("train", 3 * n, generator))
    rows = candidates if trained is None else torch.cat([trained, candidates])
    _, ids = torch.unique(rows, dim=0, return_inverse=True)
    seen = set(ids[: len(rows) - len(candidates)].tolist())
    picked, taken = [], set()
    for i, key in enumerate(ids[len(rows) - len(candidates) :].tolist()):
        if key not in seen and key not in taken:
            picked.append(i)
            taken.add(key)
            if len(picked) == n:
                break
    return candidates[picked]


@torch.no_grad()
def unseen_exact_match(run_dir: Path, overrides: list[str], steps: int, device: torch.device) -> float:
    """Greedy exact-match of the run's best checkpoint on :func:`unseen_problems` (the run trained on ``device``)."""
    from benchmarks.train_speed import compose
    from data.build import data_module
    from training.config import build
    from training.load import load_module

    cfg = compose(overrides, run_dir)
    datamodule = data_module(build(cfg.data, "data"))  # the settings, research pieces included (data/build.py)
    module = load_module(RunDir(run_dir).best_checkpoint)[0].eval()
    seqs = unseen_problems(datamodule, steps, device=device)
    right = torch.cat([module.fmt.exact_match(module.decode_answers(s), s) for s in seqs.split(2500)])
    return round(right.float().mean().item(), 5)


def reference_run(overrides: list[str], workdir: Path, device: torch.device) -> dict:
    """The nanoGPT-style reference trained as ``overrides`` say, in a bare loop, to the run's target."""
    from benchmarks.train_speed import compose, reference_loss
    from training.assemble import assemble
    from training.optim import lr_schedule, optimizer_for

    quiet = ["logger=none", "analysis=none", "callbacks.attention_maps=null", "callbacks.progress_bar=null"]
    cfg = compose([*overrides, *quiet], workdir)
    datamodule, module, *_ = assemble(cfg)  # seeds everything as train.py does
    c, fmt = module.net.cfg, datamodule.fmt
    P, A = fmt.prompt_len, fmt.answer_len
    model = RefGPT(datamodule.vocab_size, fmt.seq_len, c.d_model, c.n_heads, c.n_layers)
    nanogpt_init(model)
    model.to(device)
    max_steps, every = cfg.trainer.max_steps, min(cfg.trainer.val_check_interval, cfg.trainer.max_steps)
    optimizer = optimizer_for(model, module.optim)
    scheduler = lr_schedule(optimizer, module.optim, max_steps)
    stream = iter(datamodule.training_stream(device))
    val = datamodule.held_out_set("val").to(device)

    def val_loss(seqs: torch.Tensor) -> float:
        model.eval()
        with torch.no_grad():
            value = reference_loss(model, seqs, P).item()
        model.train()
        return value

    def exact_match(seqs: torch.Tensor) -> float:
        model.eval()
        with torch.no_grad():
            right = torch.cat(
                [fmt.exact_match(model(s[:, :-1])[:, P - 1 : P - 1 + A].argmax(-1), s) for s in seqs.split(2500)]
            )
        model.train()
        return right.float().mean().item()

    started, step, reached, history = time.perf_counter(), 0, None, []
    while step < max_steps and reached is None:
        loss = reference_loss(model, next(stream), P)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.trainer.gradient_clip_val:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.trainer.gradient_clip_val)
        optimizer.step()
        scheduler.step()
        step += 1
        if step % every == 0 or step == max_steps:
            history.append((step, round(exact_match(val), 4)))
            right = cfg.target_accuracy is not None and history[-1][1] > cfg.target_accuracy
            if right and (cfg.get("target_loss") is None or val_loss(val) < cfg.target_loss):  # the default's stop
                reached = step
    seconds = time.perf_counter() - started
    test = exact_match(datamodule.held_out_set("test").to(device))
    return {"steps": step, "reached_step": reached, "train_seconds": round(seconds, 2), "test_exact_match": test}


def bench_converge(
    device: torch.device,
    seeds: list[int],
    overrides: tuple[str, ...] | list[str] = (),
    target: float = 0.999,
    variants: tuple[str, ...] = VARIANTS,
    say=print,
) -> dict:
    """Every variant per seed, taking turns; the runs, and per variant the medians and how many seeds reached
    ``target`` test exact-match."""
    import tempfile

    from benchmarks.train_speed import device_overrides

    base = [*device_overrides(device), *overrides]
    # the previous recipe first, so that the run's own overrides (a shorter test run's max_steps) still apply
    commands = {"default": base, "previous": [*PREVIOUS_RECIPE, *base], "reference": base}
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="bench-converge-") as tmp:
        for seed in seeds:
            for name in variants:
                run_overrides = [*commands[name], f"seed={seed}"]
                run_dir = Path(tmp) / f"{name}{seed}"
                run = {"seed": seed}
                if name == "reference":
                    run |= reference_run(run_overrides, run_dir, device)
                else:
                    seconds, done, r = timed_train(run_overrides, run_dir)
                    run["wall_seconds"] = round(seconds, 2)
                    if done.returncode != 0 or r is None or r.get("status") != "ok":
                        run["error"] = failure(done)
                    else:
                        run |= {k: r.get(k) for k in ("steps", "train_seconds", "test_exact_match", "phases")}
                        if name == "default":
                            run["unseen_exact_match"] = unseen_exact_match(run_dir, run_overrides, r["steps"], device)
                if "error" not in run:
                    run["reached"] = run["test_exact_match"] >= target
                say(f"converge: {name} seed {seed}: " + ", ".join(f"{k} {v}" for k, v in run.items() if k != "phases"))
                runs[name].append(run)
    summary = {}
    for name, done_runs in runs.items():
        ok = [r for r in done_runs if "error" not in r]
        median = lambda key, ok=ok: statistics.median(r[key] for r in ok) if ok and key in ok[0] else None  # noqa: E731
        summary[name] = {
            "command": "python train.py " + " ".join([*commands[name], "seed=S"]) if name != "reference" else
            "RefGPT in a bare loop, the default's recipe: " + " ".join([*commands[name], "seed=S"]),
            "runs": done_runs,
            "median_steps": median("steps"),
            "max_steps": max((r["steps"] for r in ok), default=None),
            "median_train_seconds": median("train_seconds"),
            "median_wall_seconds": median("wall_seconds"),
            "reached": sum(r.get("reached", False) for r in done_runs),
            "min_test_exact_match": min((r["test_exact_match"] for r in ok), default=None),
        }  # fmt: skip
    ratio = lambda key: (  # noqa: E731
        round(summary["default"][key] / summary["previous"][key], 3)
        if {"default", "previous"} <= summary.keys() and summary["default"][key] and summary["previous"][key]
        else None
    )
    return {
        "device": str(device),
        "target": target,
        "seeds": list(seeds),
        "variants": summary,
        "steps_ratio": ratio("median_steps"),
        "train_seconds_ratio": ratio("median_train_seconds"),
        "wall_seconds_ratio": ratio("median_wall_seconds"),
        "errors": {f"{n}/{r['seed']}": r["error"] for n, rs in runs.items() for r in rs if "error" in r},
    }
