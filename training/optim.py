"""The optimizers and their learning-rate schedule (configs/optim/): Muon for the blocks' weight matrices beside
AdamW for the rest, as one ``torch.optim.Optimizer`` whose param groups each name their update rule (nanochat's
``MuonAdamW`` is the model), and one warmup-then-cosine curve for every group's rate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import lightning as L
import torch
from torch.optim.adamw import adamw as adamw_update  # torch.optim.AdamW's step, as a function

from data.checks import check_whole

MATRIX_OPTIMIZERS = ("adamw", "muon")


@dataclass(frozen=True)
class OptimConfig:
    """The optimizers and their schedule: linear warmup, then cosine decay to ``lr * min_lr_ratio`` at step
    ``decay_steps`` (null: the trainer's last step), held there after.

    matrices: what updates the blocks' 2-D weight matrices -- ``adamw`` (everything on AdamW) or ``muon`` (Muon at
    ``muon_lr`` with ``muon_momentum``); embeddings, biases and LayerNorm gains stay on AdamW at ``lr`` either way.
    Both rates follow the same schedule. The defaults are the recipe of checkpoints saved before these settings
    existed, so they load as they trained.
    """

    lr: float = 3e-3
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1
    matrices: str = "adamw"
    muon_lr: float = 0.02
    muon_momentum: float = 0.95
    decay_steps: int | None = None

    def __post_init__(self) -> None:
        number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)  # noqa: E731
        if not (number(self.lr) and self.lr > 0):
            raise ValueError(f"lr={self.lr!r}: must be a number > 0 (e.g. 3e-3)")
        if not (number(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay={self.weight_decay!r}: must be a number >= 0")
        betas = list(self.betas) if isinstance(self.betas, Sequence) and not isinstance(self.betas, str) else None
        if betas is None or len(betas) != 2 or not all(number(b) and 0 <= b < 1 for b in betas):
            raise ValueError(f"betas={self.betas!r}: must be two numbers in [0, 1), e.g. [0.9, 0.98]")
        object.__setattr__(self, "betas", tuple(betas))
        check_whole("warmup_steps", self.warmup_steps, least=0)
        if not (number(self.min_lr_ratio) and 0 <= self.min_lr_ratio <= 1):
            raise ValueError(f"min_lr_ratio={self.min_lr_ratio!r}: must be a number in [0, 1]")
        if self.matrices not in MATRIX_OPTIMIZERS:
            raise ValueError(f"matrices={self.matrices!r}: must be one of {', '.join(MATRIX_OPTIMIZERS)}")
        if not (number(self.muon_lr) and self.muon_lr > 0):
            raise ValueError(f"muon_lr={self.muon_lr!r}: must be a number > 0 (e.g. 0.02)")
        if not (number(self.muon_momentum) and 0 <= self.muon_momentum < 1):
            raise ValueError(f"muon_momentum={self.muon_momentum!r}: must be a number in [0, 1)")
        if self.decay_steps is not None:
            check_whole("decay_steps", self.decay_steps, hint=", or null (max_steps)")

    def to_dict(self) -> dict:
        return {**asdict(self), "betas": list(self.betas)}


# ---- the optimizer --------------------------------------------------------------------------------------
# torch.optim.Muon's settings (its defaults), which the usual Muon rate (~0.02) is quoted for
MUON = {"nesterov": True, "ns_coefficients": (3.4445, -4.775, 2.0315), "ns_steps": 5, "eps": 1e-7}


class MuonAdamW(torch.optim.Optimizer):
    """Muon and AdamW in one optimizer: each param group's ``rule`` says which updates it.

    ``rule="muon"``: ``torch.optim.Muon``'s update (nesterov momentum, orthogonalised by Newton-Schulz), with the
    iteration batched over matrices of one shape -- torch's steps each matrix alone, ~180 tiny matmuls a step for
    this model, which on a CPU cost more than the forward and backward passes; batched, 30.
    ``rule="adamw"``: ``torch.optim.AdamW``'s update (its functional form), fused into one kernel where the group
    says ``fused``. State per parameter as theirs: ``momentum_buffer``; ``step``, ``exp_avg``, ``exp_avg_sq``.
    """

    def __init__(self, param_groups: list[dict]):
        super().__init__(param_groups, defaults={})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                (self._muon if group["rule"] == "muon" else self._adamw)(group, params)
        return loss

    def _muon(self, group: dict, params: list[torch.Tensor]) -> None:
        grads, bufs, momentum = [p.grad for p in params], [], group["momentum"]
        for p in params:
            if "momentum_buffer" not in self.state[p]:
                self.state[p]["momentum_buffer"] = torch.zeros_like(p.grad, memory_format=torch.preserve_format)
            bufs.append(self.state[p]["momentum_buffer"].lerp_(p.grad, 1 - momentum))  # torch.optim.Muon's momentum
        updates = [g.lerp(b, momentum) for g, b in zip(grads, bufs, strict=True)] if group["nesterov"] else bufs
        by_shape: dict[tuple, list[int]] = {}  # matrices of one shape (a tall one transposed) orthogonalised at once
        for i, u in enumerate(updates):
            by_shape.setdefault((min(u.shape), max(u.shape)), []).append(i)
        for indices in by_shape.values():
            wide = torch.stack([updates[i] if updates[i].size(0) <= updates[i].size(1) else updates[i].T
                                for i in indices])  # fmt: skip
            ortho = newton_schulz(wide, group["ns_coefficients"], group["ns_steps"], group["eps"])
            for k, i in enumerate(indices):
                p = params[i]
                u = ortho[k] if p.size(0) <= p.size(1) else ortho[k].T
                scale = math.sqrt(max(1.0, p.size(0) / p.size(1)))  # torch's "original" adjust_lr_fn
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(u.to(p.dtype), alpha=-group["lr"] * scale)

    def _adamw(self, group: dict, params: list[torch.Tensor]) -> None:
        for p in params:
            state = self.state[p]
            if not state:  # as torch.optim.AdamW starts one: the step count on the device only when fused
                state["step"] = torch.zeros((), dtype=torch.float32, device=p.device if group["fused"] else "cpu")
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        states = [self.state[p] for p in params]
        beta1, beta2 = group["betas"]
        adamw_update(
            params,
            [p.grad for p in params],
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],  # no amsgrad
            [s["step"] for s in states],
            fused=group["fused"],
            amsgrad=False,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=False,
        )


def newton_schulz(g: torch.Tensor, coefficients, steps: int, eps: float) -> torch.Tensor:
    """(n, rows, cols) with rows <= cols -> each matrix's nearest semi-orthogonal one, roughly (Muon's quintic
    iteration, torch.optim.Muon's coefficients). bf16 on a GPU (as torch's), fp32 on a CPU, where small bf16
    matmuls are slower."""
    a, b, c = coefficients
    x = g.bfloat16() if g.is_cuda else g.float()
    x = x / x.norm(dim=(1, 2), keepdim=True).clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.mT
        x = torch.baddbmm(x, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x


def hidden_matrices(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The weights of the linear layers inside the blocks -- attention and MLP projections, what Muon is for --:
    every ``nn.Linear`` weight but the LM head's (and any tied to an embedding)."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    return [
        m.weight
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and not name.endswith("lm_head") and id(m.weight) not in embeddings
    ]


def optimizer_for(model: torch.nn.Module, config: OptimConfig, fused: bool = True) -> MuonAdamW:
    """The optimizer ``config`` asks for, its groups in this order: Muon for the hidden matrices (``matrices:
    muon``), then AdamW for the other matrices with weight decay and for the vectors (biases, LayerNorm gains)
    without. AdamW is fused into one kernel for all tensors where torch can (~4% of a CPU step); mixed-precision
    runs pass ``fused=False`` and step as they always have (Lightning refused torch's fused AdamW there: it
    unscales the gradients inside its step, and Lightning clips them first)."""
    muon = hidden_matrices(model) if config.matrices == "muon" else []
    on_muon = {id(p) for p in muon}
    rest = [p for p in model.parameters() if id(p) not in on_muon]
    fused = fused and next(model.parameters()).device.type in ("cpu", "cuda")
    adamw = {"rule": "adamw", "lr": config.lr, "betas": config.betas, "eps": 1e-8, "fused": fused}
    groups = [
        {"params": [p for p in rest if p.dim() >= 2], **adamw, "weight_decay": config.weight_decay},
        {"params": [p for p in rest if p.dim() < 2], **adamw, "weight_decay": 0.0},
    ]
    if muon:
        muon_rate = {"lr": config.muon_lr, "momentum": config.muon_momentum, "weight_decay": config.weight_decay}
        groups.insert(0, {"rule": "muon", "params": muon, **muon_rate, **MUON})
    return MuonAdamW(groups)


def lr_schedule(optimizer: torch.optim.Optimizer, config: OptimConfig, max_steps: int):
    """Linear warmup to each group's rate, cosine decay to ``min_lr_ratio`` of it at ``decay_steps`` (null:
    ``max_steps``), then held: a per-step ``LambdaLR``."""
    total = max(config.decay_steps or max_steps, 1)
    warmup = min(config.warmup_steps, total - 1)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(warmup, 1)
        progress = min((step - warmup) / max(total - warmup, 1), 1.0)
        return config.min_lr_ratio + (1 - config.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def recipe(config: OptimConfig):
    """The recipe as the callable a ``CalculatorModule`` is handed (its ``optimizer``): (model, max_steps, fused)
    -> (the optimizer, its per-step schedule)."""

    def optimizer(model: torch.nn.Module, max_steps: int, fused: bool = True):
        built = optimizer_for(model, config, fused)
        return built, lr_schedule(built, config, max_steps)

    optimizer.config = config  # what it was built from (the benchmarks' plain loops read it)
    return optimizer


# ---- checkpoints saved before MuonAdamW took its groups itself -----------------------------------------
def upgrade_checkpoint(checkpoint: dict) -> None:
    """Rewrites, in place, the optimizer and scheduler states of a checkpoint saved before this module into
    :class:`MuonAdamW`'s and :func:`lr_schedule`'s, so an interrupted run resumes:

    - the Muon recipe's ``{"parts": [muon, adamw]}`` (two optimizers' states) -> one state, Muon's group first;
    - the AdamW recipe's ``torch.optim.AdamW`` state -> its groups tagged ``rule="adamw"``;
    - that recipe's ``SequentialLR`` (LinearLR then CosineAnnealingLR) -> the ``LambdaLR`` of :func:`lr_schedule`
      at the same step: the run goes on along this curve, the same cosine, and in the warmup (which rose to the
      full rate a step later) at most 1/warmup_steps of the rate above the old one's.
    """
    states = checkpoint.get("optimizer_states", [])
    for i, state in enumerate(states):
        if "parts" in state:
            muon, adamw = state["parts"]
            shift = sum(len(g["params"]) for g in muon["param_groups"])  # AdamW's parameters count on from Muon's
            state = {
                "state": {**muon["state"], **{k + shift: v for k, v in adamw["state"].items()}},
                "param_groups": [{**g, "rule": "muon"} for g in muon["param_groups"]]
                + [{**g, "params": [k + shift for k in g["params"]]} for g in adamw["param_groups"]],
            }
        state["param_groups"] = [{"rule": "adamw", **g} for g in state["param_groups"]]  # untagged: AdamW's
        states[i] = state
    for i, scheduler in enumerate(checkpoint.get("lr_schedulers", [])):
        if "_schedulers" in scheduler:  # SequentialLR's state; LambdaLR keeps its base rates and takes the step
            last = {key: scheduler[key] for key in ("last_epoch", "_last_lr")}
            checkpoint["lr_schedulers"][i] = {**last, "lr_lambdas": [None] * len(scheduler["_last_lr"])}


class OldOptimizerStates(L.Callback):
    """A run resumed from a checkpoint saved before this module: its optimizer and scheduler states upgraded
    (:func:`upgrade_checkpoint`) as Lightning reads them, before it hands them to the optimizer."""

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        upgrade_checkpoint(checkpoint)
