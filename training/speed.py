"""Training speed, side by side in one process: our Lightning path, the same model in a bare loop, and a
nanoGPT-style reference model -- plus this machine's matrix-multiply peak, to turn tokens/s into MFU.

Used by ``python bench.py train [--digits N]``. Every variant trains the default calculator (d_model=64,
4 heads, 2 layers, batch 256, fp32; 3-digit addition unless told otherwise) on the same data stream with
the same optimizer; the variants take turns, round after round, so a noisy neighbour slows them all alike.
"""

from __future__ import annotations

import resource
import statistics
import time

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from data.datamodule import ArithmeticDataModule
from model.module import AdamWSchedule, CalculatorModule, adamw
from model.reference import RefGPT

OPTIM = AdamWSchedule().to_dict()  # the training default


# ---- the three training paths ------------------------------------------------------------------------------
def reference_loss(reference: RefGPT, seq: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """nanoGPT's way: logits at every position, the loss on the answer's (the task ours trains on)."""
    logits = reference(seq[:, :-1])[:, prompt_len - 1 :]
    return F.cross_entropy(logits.flatten(0, 1), seq[:, prompt_len:].flatten())


def bare_steps(loss_of, model: nn.Module, dm: ArithmeticDataModule, steps: int) -> list[float]:
    """A plain PyTorch loop; returns each step's seconds. ``loss_of(seq)`` -> the batch's loss."""
    optimizer = adamw(model, OPTIM["lr"], OPTIM["weight_decay"], OPTIM["betas"])  # as in training
    stream, times = iter(dm.train_dataloader()), []
    for _ in range(steps):
        started = time.perf_counter()
        loss = loss_of(next(stream))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        times.append(time.perf_counter() - started)
    return times


class _StepTimes(L.Callback):
    """Time between consecutive batch ends: a whole step, batch fetch and Lightning's own work included."""

    def __init__(self):
        self.times, self._last = [], None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        now = time.perf_counter()
        if self._last is not None:
            self.times.append(now - self._last)
        self._last = now


def lightning_steps(module: CalculatorModule, dm: ArithmeticDataModule, steps: int) -> list[float]:
    """Our training path: Trainer + LightningModule + DataModule with train.py's step settings (gradient
    clipping, step-wise schedule, logging), without validation or checkpoints inside the timed steps."""
    timer = _StepTimes()
    trainer = L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        gradient_clip_val=1.0,
        callbacks=[timer],
    )
    trainer.fit(module, datamodule=dm)
    return timer.times


# ---- FLOPs, the machine's peak, and where a step's time goes ------------------------------------------------
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm")


def step_flops(loss_of, seq: torch.Tensor, n_layers: int, d_model: int) -> tuple[int, int]:
    """(all, matmul-only) FLOPs of one training step's forward + backward on ``seq``, counted as run.

    Matrix multiplies are counted by torch's FlopCounterMode, so work a model skips is not counted. Where it
    does not see the attention kernel (the fused CPU kernel, in torch 2.13), the scores and weighted sums are
    added as the PaLM/nanoGPT estimate does: 12 x layers x context x d_model per token (forward + backward).
    """
    with FlopCounterMode(display=False) as counter:
        loss_of(seq).backward()
    B, T = seq.shape[0], seq.shape[1] - 1
    counts = counter.get_flop_counts()["Global"]
    matmul = sum(n for op, n in counts.items() if str(op).rsplit(".", 1)[-1] in ("mm", "addmm", "bmm"))
    total = counter.get_total_flops()
    if not any("attention" in str(op) for op in counts):
        total += 12 * n_layers * T * d_model * B * T
    return total, matmul


def matmul_peak(size: int = 2048, repeat: int = 5) -> float:
    """FLOP/s of a large fp32 matrix multiply on this machine, best of ``repeat``."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeat))
    return 2 * size**3 / best


def matmul_share(loss_of, model: nn.Module, dm: ArithmeticDataModule, steps: int = 10) -> float:
    """Share of a bare training step's time spent inside matrix multiplies (torch.profiler, ``steps`` steps)."""
    bare_steps(loss_of, model, dm, 3)  # warm up
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        bare_steps(loss_of, model, dm, steps)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    return sum(e.self_cpu_time_total for e in events if e.key in MATMUL_OPS) / total


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def data_throughput(dm: ArithmeticDataModule, batches: int = 200) -> float:
    stream = iter(dm.train_dataloader())
    seconds = _timed(lambda: [next(stream) for _ in range(batches)])
    return batches * dm.batch_size / seconds


# ---- the section -------------------------------------------------------------------------------------------
def bench_train(rounds: int = 3, steps: int = 60, warmup: int = 10, digits: int = 3) -> dict:
    torch.manual_seed(0)
    dm = ArithmeticDataModule(digits=digits, batch_size=256, n_val=10, n_test=10)
    P, T = dm.fmt.prompt_len, dm.fmt.seq_len - 1
    tokens_per_step = dm.batch_size * T

    def calculator() -> CalculatorModule:
        return CalculatorModule(
            model=dict(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len), fmt=dm.fmt.to_dict(), optim=OPTIM
        )

    ours, bare = calculator(), calculator()
    reference = RefGPT(dm.vocab_size, dm.fmt.seq_len)
    losses = {"bare": lambda s: bare.forced_scores(s)[0], "nanogpt": lambda s: reference_loss(reference, s, P)}
    models = {"bare": bare, "nanogpt": reference}
    per_step: dict[str, list[float]] = {"lightning": [], "bare": [], "nanogpt": []}
    for _ in range(rounds):  # take turns, so every variant sees the same machine
        per_step["lightning"] += lightning_steps(ours, dm, warmup + steps)[warmup:]
        for name in ("bare", "nanogpt"):
            per_step[name] += bare_steps(losses[name], models[name], dm, warmup + steps)[warmup:]
    median = {name: statistics.median(times) for name, times in per_step.items()}
    tps = {name: tokens_per_step / seconds for name, seconds in median.items()}

    cfg, batch = ours.net.cfg, next(iter(dm.train_dataloader()))
    flops, matmul_flops = step_flops(losses["bare"], batch, cfg.n_layers, cfg.d_model)
    reference_flops, _ = step_flops(losses["nanogpt"], batch, cfg.n_layers, cfg.d_model)
    share = matmul_share(losses["bare"], bare, dm)
    peak = matmul_peak()
    return {
        "setup": f"{digits}-digit addition, d_model={cfg.d_model}, {cfg.n_heads} heads, {cfg.n_layers} layers, "
        f"batch {dm.batch_size} x {T} tokens, fp32, {torch.get_num_threads()} threads; "
        f"median of {rounds} x {steps} steps each",
        "ms_per_step": {name: round(1000 * s, 2) for name, s in median.items()},
        "tokens_per_second": round(tps["lightning"]),
        "tokens_per_second_by_path": {name: round(v) for name, v in tps.items()},
        "lightning_over_bare": round(tps["lightning"] / tps["bare"], 3),
        "model_over_nanogpt": round(tps["bare"] / tps["nanogpt"], 3),
        "flops_per_token": round(flops / tokens_per_step),
        "reference_flops_per_token": round(reference_flops / tokens_per_step),
        "matmul_peak_gflops": round(peak / 1e9, 1),
        "mfu": round(flops / median["lightning"] / peak, 3),
        "matmul_share_of_step": round(share, 3),
        "matmul_gflops_in_step": round(matmul_flops / (share * median["bare"]) / 1e9, 1),
        "data_problems_per_second": round(data_throughput(dm)),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "params": ours.net.n_params,
    }
