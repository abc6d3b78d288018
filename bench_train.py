"""Training speed, side by side in one process: our Lightning path, the same model in a bare loop, and a
nanoGPT-style reference model -- plus this machine's matrix-multiply peak, to turn tokens/s into MFU.

Used by ``python bench.py train``. Every variant trains the default calculator (3-digit addition,
d_model=64, 4 heads, 2 layers, batch 256, fp32) on the same data stream with the same optimizer; the
variants take turns, round after round, so a noisy neighbour slows them all alike.
"""

from __future__ import annotations

import resource
import statistics
import time

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

from data.datamodule import ArithmeticDataModule
from model.module import CalculatorModule

OPTIM = dict(lr=5e-3, weight_decay=0.1, betas=[0.9, 0.98], warmup_steps=100, min_lr_ratio=0.1)


# ---- a nanoGPT-style reference: one fused c_attn projection, scaled_dot_product_attention ----------------
class RefBlock(nn.Module):
    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class RefGPT(nn.Module):
    def __init__(self, vocab: int, block: int, d: int = 64, n_heads: int = 4, n_layers: int = 2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(RefBlock(d, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# ---- the three training paths ------------------------------------------------------------------------------
def _optimizer(model: nn.Module) -> torch.optim.Optimizer:
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": matrices, "weight_decay": OPTIM["weight_decay"]},
                              {"params": vectors, "weight_decay": 0.0}], lr=OPTIM["lr"], betas=OPTIM["betas"])


def bare_steps(logits_of, model: nn.Module, dm: ArithmeticDataModule, steps: int) -> list[float]:
    """A plain PyTorch loop; returns each step's seconds. ``logits_of(seq)`` -> logits of seq[:, :-1]."""
    optimizer, stream, P, times = _optimizer(model), iter(dm.train_dataloader()), dm.fmt.prompt_len, []
    for _ in range(steps):
        started = time.perf_counter()
        seq = next(stream)
        logits = logits_of(seq)[:, P - 1:]
        loss = F.cross_entropy(logits.flatten(0, 1), seq[:, P:].flatten())
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
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        num_sanity_val_steps=0, gradient_clip_val=1.0, callbacks=[timer])
    trainer.fit(module, datamodule=dm)
    return timer.times


# ---- FLOPs and the machine's peak ----------------------------------------------------------------------------
def flops_per_token(model: nn.Module, n_layers: int, d_model: int, context: int) -> int:
    """Training FLOPs per token: 6 x (parameters used in matrix multiplies) + 12 x layers x context x d_model
    for the attention scores and weighted sums (forward + backward), as in the PaLM/nanoGPT estimate."""
    matmul_params = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    return 6 * matmul_params + 12 * n_layers * context * d_model


def matmul_peak(size: int = 2048, repeat: int = 5) -> float:
    """FLOP/s of a large fp32 matrix multiply on this machine, best of ``repeat``."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeat))
    return 2 * size**3 / best


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def data_throughput(dm: ArithmeticDataModule, batches: int = 200) -> float:
    stream = iter(dm.train_dataloader())
    seconds = _timed(lambda: [next(stream) for _ in range(batches)])
    return batches * dm.batch_size / seconds


# ---- the section -------------------------------------------------------------------------------------------
def bench_train(rounds: int = 3, steps: int = 60, warmup: int = 10) -> dict:
    torch.manual_seed(0)
    dm = ArithmeticDataModule(batch_size=256, n_val=10, n_test=10)
    tokens_per_step = dm.batch_size * (dm.fmt.seq_len - 1)
    ours = CalculatorModule(model=dict(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len),
                            fmt=dm.fmt.to_dict(), optim=OPTIM)
    bare_model = CalculatorModule(model=dict(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len),
                                  fmt=dm.fmt.to_dict(), optim=OPTIM).net
    reference = RefGPT(dm.vocab_size, dm.fmt.seq_len)
    per_step: dict[str, list[float]] = {"lightning": [], "bare": [], "nanogpt": []}
    for _ in range(rounds):  # take turns, so every variant sees the same machine
        per_step["lightning"] += lightning_steps(ours, dm, warmup + steps)[warmup:]
        per_step["bare"] += bare_steps(lambda s: bare_model(s[:, :-1])[0], bare_model, dm, warmup + steps)[warmup:]
        per_step["nanogpt"] += bare_steps(lambda s: reference(s[:, :-1]), reference, dm, warmup + steps)[warmup:]
    median = {name: statistics.median(times) for name, times in per_step.items()}
    tps = {name: tokens_per_step / seconds for name, seconds in median.items()}
    net = ours.net
    fpt = flops_per_token(net, net.cfg.n_layers, net.cfg.d_model, dm.fmt.seq_len - 1)
    peak = matmul_peak()
    return {
        "setup": f"3-digit addition, d_model=64, 4 heads, 2 layers, batch 256 x {dm.fmt.seq_len - 1} tokens, fp32, "
                 f"{torch.get_num_threads()} threads; median of {rounds} x {steps} steps each",
        "ms_per_step": {name: round(1000 * s, 2) for name, s in median.items()},
        "tokens_per_second": round(tps["lightning"]),
        "tokens_per_second_by_path": {name: round(v) for name, v in tps.items()},
        "lightning_over_bare": round(tps["lightning"] / tps["bare"], 3),
        "model_over_nanogpt": round(tps["bare"] / tps["nanogpt"], 3),
        "flops_per_token": fpt,
        "matmul_peak_gflops": round(peak / 1e9, 1),
        "mfu": round(fpt * tps["lightning"] / peak, 3),
        "data_problems_per_second": round(data_throughput(dm)),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "params": net.n_params,
    }
