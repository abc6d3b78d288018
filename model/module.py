"""LightningModule: trains the transformer on answer tokens; validates teacher-forced, tests by greedy decoding."""

from __future__ import annotations

import math
from collections.abc import MutableMapping, Sequence
from dataclasses import asdict, dataclass

import lightning as L
import torch
import torch.nn.functional as F

from data.positions import place_ids, place_tensor, randomised, shifted, top_place
from data.problems import ProblemFormat
from data.stream import width_of
from model.transformer import Transformer, TransformerConfig

COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")  # torch.compile
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes that capture CUDA graphs on a GPU


MATRIX_OPTIMIZERS = ("adamw", "muon")


@dataclass(frozen=True)
class AdamWSchedule:
    """The optimizer and its learning-rate schedule: linear warmup, then cosine decay to ``lr * min_lr_ratio`` at
    step ``decay_steps`` (null: the trainer's last step), held there after.

    matrices: what updates the blocks' 2-D weight matrices -- ``adamw`` (everything on AdamW) or ``muon``
    (``torch.optim.Muon`` at ``muon_lr`` with ``muon_momentum``); embeddings, biases and LayerNorm gains stay on
    AdamW at ``lr`` either way. Both rates follow the same schedule. The defaults are the recipe of checkpoints
    saved before these settings existed, so they load as they trained.
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
        whole = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
        if not (number(self.lr) and self.lr > 0):
            raise ValueError(f"lr={self.lr!r}: must be a number > 0 (e.g. 3e-3)")
        if not (number(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay={self.weight_decay!r}: must be a number >= 0")
        betas = list(self.betas) if isinstance(self.betas, Sequence) and not isinstance(self.betas, str) else None
        if betas is None or len(betas) != 2 or not all(number(b) and 0 <= b < 1 for b in betas):
            raise ValueError(f"betas={self.betas!r}: must be two numbers in [0, 1), e.g. [0.9, 0.98]")
        object.__setattr__(self, "betas", tuple(betas))
        if not whole(self.warmup_steps) or self.warmup_steps < 0:
            raise ValueError(f"warmup_steps={self.warmup_steps!r}: must be a whole number >= 0")
        if not (number(self.min_lr_ratio) and 0 <= self.min_lr_ratio <= 1):
            raise ValueError(f"min_lr_ratio={self.min_lr_ratio!r}: must be a number in [0, 1]")
        if self.matrices not in MATRIX_OPTIMIZERS:
            raise ValueError(f"matrices={self.matrices!r}: must be one of {', '.join(MATRIX_OPTIMIZERS)}")
        if not (number(self.muon_lr) and self.muon_lr > 0):
            raise ValueError(f"muon_lr={self.muon_lr!r}: must be a number > 0 (e.g. 0.02)")
        if not (number(self.muon_momentum) and 0 <= self.muon_momentum < 1):
            raise ValueError(f"muon_momentum={self.muon_momentum!r}: must be a number in [0, 1)")
        if self.decay_steps is not None and not (whole(self.decay_steps) and self.decay_steps >= 1):
            raise ValueError(f"decay_steps={self.decay_steps!r}: must be a whole number >= 1, or null (max_steps)")

    def to_dict(self) -> dict:
        return {**asdict(self), "betas": list(self.betas)}


def adamw(model: torch.nn.Module, lr: float, weight_decay: float, betas, fused: bool = True, params=None):
    """AdamW with weight decay on matrices only (not on biases and LayerNorm gains), fused into one kernel
    for all tensors where torch can (~4% of a CPU step). Mixed precision needs ``fused=False``: Lightning
    clips gradients itself and refuses an optimizer that unscales them inside its step. ``params``: a subset of
    the model's parameters (default all)."""
    params = list(model.parameters()) if params is None else params
    matrices = [p for p in params if p.dim() >= 2]
    vectors = [p for p in params if p.dim() < 2]
    device = next(model.parameters()).device.type
    return torch.optim.AdamW(
        [{"params": matrices, "weight_decay": weight_decay}, {"params": vectors, "weight_decay": 0.0}],
        lr=lr,
        betas=tuple(betas),
        fused=fused and device in ("cpu", "cuda"),
    )


def hidden_matrices(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The weights of the linear layers inside the blocks -- attention and MLP projections, what Muon is for --:
    every ``nn.Linear`` weight but the LM head's (and any tied to an embedding)."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    return [
        m.weight
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and not name.endswith("lm_head") and id(m.weight) not in embeddings
    ]


class BatchedMuon(torch.optim.Muon):
    """``torch.optim.Muon`` with the Newton-Schulz orthogonalisation batched over matrices of one shape (a tall
    one transposed): torch's steps each matrix alone in bf16, ~180 tiny matmuls a step for this model, which on
    a CPU cost more than the forward and backward passes; batched, 30. bf16 on a GPU (as torch's), fp32 on a
    CPU, where small bf16 matmuls are slower. Same settings, same state (``momentum_buffer``), same update rule."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            bufs = []
            for p in params:
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad, memory_format=torch.preserve_format)
                bufs.append(state["momentum_buffer"])
            momentum = group["momentum"]
            torch._foreach_lerp_(bufs, grads, 1 - momentum)
            updates = [g.lerp(b, momentum) for g, b in zip(grads, bufs, strict=True)] if group["nesterov"] else bufs
            by_shape: dict[tuple, list[int]] = {}
            for i, u in enumerate(updates):
                rows, cols = u.shape
                by_shape.setdefault((min(rows, cols), max(rows, cols)), []).append(i)
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
        return loss


def newton_schulz(g: torch.Tensor, coefficients, steps: int, eps: float) -> torch.Tensor:
    """(n, rows, cols) with rows <= cols -> each matrix's nearest semi-orthogonal one, roughly (Muon's quintic
    iteration, torch.optim.Muon's coefficients)."""
    a, b, c = coefficients
    x = g.bfloat16() if g.is_cuda else g.float()
    x = x / x.norm(dim=(1, 2), keepdim=True).clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.mT
        x = torch.baddbmm(x, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x


class JointState(MutableMapping):
    """The per-parameter state of several optimizers as one mapping; a write goes to the optimizer that owns the
    parameter (Lightning moves a resumed optimizer's state to the device by writing ``state[p] = ...``)."""

    def __init__(self, parts):
        self.parts = parts

    def _owner(self, p: torch.Tensor) -> torch.optim.Optimizer:
        for part in self.parts:
            if p in part.state or any(p is q for group in part.param_groups for q in group["params"]):
                return part
        raise KeyError("a parameter of neither optimizer")

    def __getitem__(self, p):
        return self._owner(p).state[p]

    def __setitem__(self, p, value) -> None:
        self._owner(p).state[p] = value

    def __delitem__(self, p) -> None:
        del self._owner(p).state[p]

    def __iter__(self):
        for part in self.parts:
            yield from part.state

    def __len__(self) -> int:
        return sum(len(part.state) for part in self.parts)


class MuonAdamW(torch.optim.Optimizer):
    """``torch.optim.Muon`` for some parameters and AdamW for the rest, stepped as one optimizer (Lightning's
    automatic optimisation, gradient clipping and LR schedulers take one). Its param groups and state are the
    two parts' own, so a schedule's learning rates reach both and a checkpoint holds both."""

    def __init__(self, muon: torch.optim.Optimizer, adamw: torch.optim.Optimizer):  # noqa: D107 -- parts only
        self.parts = (muon, adamw)
        self.defaults = {}
        self._optimizer_step_pre_hooks, self._optimizer_step_post_hooks = {}, {}

    @property
    def param_groups(self) -> list[dict]:
        return [g for part in self.parts for g in part.param_groups]

    @property
    def state(self) -> JointState:
        return JointState(self.parts)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for part in self.parts:
            part.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        for part in self.parts:
            part.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return {"parts": [part.state_dict() for part in self.parts]}

    def load_state_dict(self, state_dict: dict) -> None:
        for part, state in zip(self.parts, state_dict["parts"], strict=True):
            part.load_state_dict(state)

    def __repr__(self) -> str:
        return f"MuonAdamW({', '.join(type(p).__name__ for p in self.parts)})"


def optimizer_for(model: torch.nn.Module, schedule: AdamWSchedule, fused: bool = True) -> torch.optim.Optimizer:
    """The optimizer ``schedule`` asks for: AdamW for everything, or Muon for the hidden matrices + AdamW."""
    o = schedule
    if o.matrices == "adamw":
        return adamw(model, o.lr, o.weight_decay, o.betas, fused=fused)
    hidden = hidden_matrices(model)
    ids = {id(p) for p in hidden}
    rest = [p for p in model.parameters() if id(p) not in ids]
    # Muon's "match_rms_adamw" scaling would tie its rate to AdamW's; "original" (Keller Jordan's) is what
    # its usual lr (~0.02) is quoted for
    muon = BatchedMuon(hidden, lr=o.muon_lr, weight_decay=o.weight_decay, momentum=o.muon_momentum)
    return MuonAdamW(muon, adamw(model, o.lr, o.weight_decay, o.betas, fused=fused, params=rest))


def lr_schedule(optimizer: torch.optim.Optimizer, schedule: AdamWSchedule, max_steps: int):
    """Linear warmup to each group's rate, cosine decay to ``min_lr_ratio`` of it at ``decay_steps`` (null:
    ``max_steps``), then held: a per-step ``LambdaLR``."""
    o = schedule
    total = max(o.decay_steps or max_steps, 1)
    warmup = min(o.warmup_steps, total - 1)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(warmup, 1)
        progress = min((step - warmup) / max(total - warmup, 1), 1.0)
        return o.min_lr_ratio + (1 - o.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class CalculatorModule(L.LightningModule):
    """Wraps :class:`Transformer` for training on arithmetic strings.

    Args:
        model: a :class:`TransformerConfig` as a dict.
        fmt: the :class:`ProblemFormat` as a dict (where the answer sits in each sequence).
        optim: AdamW + warmup/cosine settings (``lr``, ``weight_decay``, ``betas``, ``warmup_steps``,
            ``min_lr_ratio``).

        compile: null to train eagerly, or a ``torch.compile`` mode (``default``, ``reduce-overhead`` -- CUDA
            graphs on a GPU --, ``max-autotune``, ``max-autotune-no-cudagraphs``) for the training step's
            forward and backward; validation, tests and analysis stay eager. Costs a compile at the first step.

    The first three are saved in the checkpoint, so ``CalculatorModule.load_from_checkpoint(path)`` rebuilds
    the model with no config at hand; ``compile`` is how it ran, not what it is, and is not saved.
    """

    def __init__(self, model: dict, fmt: dict, optim: dict, compile: str | None = None):
        super().__init__()
        if compile not in COMPILE_MODES:
            modes = ", ".join(m for m in COMPILE_MODES if m)
            raise ValueError(f"compile={compile!r}: use null (eager) or a torch.compile mode: {modes}")
        self.save_hyperparameters(ignore=["compile"])
        self.schedule = AdamWSchedule(**optim)
        self.fmt = ProblemFormat(**fmt)
        config = TransformerConfig(**model)
        self.net = Transformer(config, place_ids=place_ids(self.fmt, config.place_of))
        self.val_history: list[dict] = []  # one entry per validation: step, exact_match, loss
        self.compile_mode = compile
        self.training_loss = self.teacher_forced_loss  # compiled in setup("fit") when asked

    # ---- the two ways of reading a batch ------------------------------------------------------------
    def layout(self, seq: torch.Tensor) -> ProblemFormat:
        """The format of a batch: the trained one, or, for a batch of another width (``mixed_widths`` training),
        the same format at that width (known from the sequences' length)."""
        return self.fmt if seq.shape[1] == self.fmt.seq_len else width_of(self.fmt, seq.shape[1])

    def forced_scores(self, seq: torch.Tensor):
        """One teacher-forced pass -> (loss on the answer and [EOS] tokens, (B,) whole answer is argmax).

        A greedy decoder writes the whole answer right exactly when every answer token is the argmax
        given the true tokens before it, so the second value is greedy exact-match at the cost of one pass.
        """
        return self.answer_scores(self.answer_logits(seq), seq)

    def teacher_forced_loss(
        self, seq: torch.Tensor, places: torch.Tensor | None = None, prompt_len: int | None = None
    ) -> torch.Tensor:
        """The training loss: cross-entropy on seq's answer and [EOS] tokens, teacher-forced. ``prompt_len``: the
        batch's (None: looked up from its width); the compiled training step passes it, so the lookup stays out
        of the graph and one graph serves every width of ``mixed_widths`` training."""
        return self.answer_scores(self.answer_logits(seq, places, prompt_len), seq)[0]

    def answer_logits(
        self, seq: torch.Tensor, places: torch.Tensor | None = None, prompt_len: int | None = None
    ) -> torch.Tensor:
        """Teacher-forced logits (B, answer_len + 1, vocab) predicting seq's answer and [EOS] tokens; ``places``:
        (B, seq_len) place ids (None: the trained layout's, as every evaluation reads it)."""
        P = self.layout(seq).prompt_len if prompt_len is None else prompt_len
        return self.net(seq[:, :-1], logits_from=P - 1, places=places)[0]

    def training_places(self, seq: torch.Tensor) -> torch.Tensor | None:
        """A training batch's place ids (B, seq_len), each sequence's shifted by a random 0..k, where k reaches the
        longest width the model addresses (trained digits + ``place_offset``), so every place up to there is
        learned at every width; None for a model without places, or one trained on its own layout only."""
        cfg, fmt = self.net.cfg, self.layout(seq)
        spare = self.fmt.digits + cfg.place_offset - fmt.digits  # places above this width's top one
        if not cfg.place_embedding or (fmt == self.fmt and not spare):
            return None
        places = place_tensor(fmt, cfg.place_of, seq.device)  # (seq_len,)
        out = shifted(places, torch.randint(spare + 1, (len(seq),), device=seq.device))  # (B, seq_len)
        if cfg.random_places:  # this share of the sequences: places drawn from all the model has, in order
            pick = torch.rand(len(seq), 1, device=seq.device) < cfg.random_places
            top = top_place(fmt, cfg.place_of)  # this width's highest place
            out = torch.where(pick, randomised(places, top, top + spare, len(seq)), out)
        return out

    @property
    def answer_logits_from(self) -> int:
        """The position whose next-token logits predict the first answer token (the '=' sign)."""
        return self.fmt.prompt_len - 1

    def answer_scores(self, logits: torch.Tensor, seq: torch.Tensor):
        """Logits (B, answer_len + 1, vocab) of seq's positions answer_logits_from.. -> (loss on the answer and
        [EOS], (B,) every answer token is the argmax)."""
        A = logits.shape[1] - 1
        target = seq[:, -(A + 1) :]  # the answer and [EOS]: a sequence's last tokens, whatever its width
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten())
        return loss, (logits[:, :A].argmax(-1) == target[:, :A]).all(dim=1)

    def decode_answers(self, seq: torch.Tensor) -> torch.Tensor:
        """Greedy answers (B, answer_len) for the prompts in ``seq``, decoded with the KV cache."""
        return self.net.generate(seq[:, : self.fmt.prompt_len], self.fmt.answer_len)

    def greedy_answers(self, seq: torch.Tensor, logits: torch.Tensor | None = None) -> torch.Tensor:
        """The answers (B, answer_len) greedy decoding writes for seq's prompts, for one teacher-forced pass
        (``logits``, when the caller has them) plus decoding only the problems that pass gets wrong: greedy writes
        the true answer exactly when every true answer token is the argmax (see ``forced_scores``)."""
        P, A = self.fmt.prompt_len, self.fmt.answer_len
        truth = seq[:, P : P + A]
        logits = self.answer_logits(seq) if logits is None else logits
        wrong = (logits[:, :A].argmax(-1) != truth).any(dim=1).nonzero().flatten()
        answers = truth.clone()
        if len(wrong):
            answers[wrong] = self.decode_answers(seq[wrong])
        return answers

    def mistakes(self, seq: torch.Tensor, answers: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The problems of ``seq`` whose ``answers`` (B, answer_len) are wrong, and those answers."""
        P, A = self.fmt.prompt_len, self.fmt.answer_len
        wrong = (answers != seq[:, P : P + A]).any(dim=1)
        return seq[wrong], answers[wrong]

    def score(self, seq: torch.Tensor, greedy: bool = True) -> dict[str, torch.Tensor]:
        """loss, exact_match (whole answer right) and digit_accuracy (per answer position); the answer is every
        token the model writes, the working included when the format shows it.

        greedy: decode the answers, as a user of the model gets them. Otherwise read them off the one
        teacher-forced pass that gives the loss: the same exact-match (see ``forced_scores``) for less than
        half the cost, with digit accuracy then counting each digit given the true digits before it.
        """
        return self._score(seq, greedy)[0]

    def _score(self, seq: torch.Tensor, greedy: bool) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """score's values, and the (B, answer_len) answers they judge."""
        P, A = self.fmt.prompt_len, self.fmt.answer_len
        logits = self.answer_logits(seq)
        loss, _ = self.answer_scores(logits, seq)
        answers = self.greedy_answers(seq, logits) if greedy else logits[:, :A].argmax(-1)
        right = answers == seq[:, P : P + A]  # (B, A)
        metrics = {"loss": loss, "exact_match": right.all(dim=1).float().mean(), "digit_accuracy": right.float().mean()}
        return metrics, answers

    # ---- Lightning hooks ----------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        if stage == "fit" and self.compile_mode:
            # the loss function, not the module: the state dict keeps its keys, and eval paths stay eager
            self.training_loss = torch.compile(self.teacher_forced_loss, mode=self.compile_mode)

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        if self.compile_mode in CUDA_GRAPH_MODES:
            torch.compiler.cudagraph_mark_step_begin()  # a new step: the last step's graph outputs may be reused
        loss = self.training_loss(batch, self.training_places(batch), self.layout(batch).prompt_len)
        # logged at the loggers' pace, not every step: each self.log costs Lightning a walk over its result object
        # (host time a GPU step cannot spare), and a prog_bar=True value would be read back from the device every
        # step; the bar shows it at the same pace (training/callbacks.py: StepProgressBar)
        if (self.global_step + 1) % self.trainer.log_every_n_steps == 0:  # this step ends at a multiple of n
            self.log("train/loss", loss)
        return loss

    def _log_scores(self, metrics: dict[str, torch.Tensor], split: str, batch_size: int) -> None:
        for name, value in metrics.items():
            self.log(f"{split}/{name}", value, prog_bar=name == "exact_match", batch_size=batch_size, sync_dist=True)

    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        # validation runs often during training: teacher-forced (the same exact-match, see forced_scores)
        self._log_scores(self.score(batch, greedy=False), "val", len(batch))

    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:
            metrics = self.trainer.callback_metrics
            self.val_history.append(
                {
                    "step": self.global_step,
                    "exact_match": metrics["val/exact_match"].item(),
                    "loss": metrics["val/loss"].item(),
                }
            )

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["val_history"] = self.val_history  # so a resumed run keeps its whole learning curve

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.val_history = list(checkpoint.get("val_history", []))

    def on_test_epoch_start(self) -> None:
        self.test_wrong: list[tuple[torch.Tensor, torch.Tensor]] = []  # (problems, answers written) per batch

    def test_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        # the test decodes greedily, as a user of the model gets the answers, and keeps the ones it gets wrong
        metrics, answers = self._score(batch, greedy=True)
        self.test_wrong.append(tuple(t.cpu() for t in self.mistakes(batch, answers)))
        self._log_scores(metrics, "test", len(batch))

    def configure_optimizers(self):
        mixed = str(self.trainer.precision).endswith("-mixed")
        optimizer = optimizer_for(self, self.schedule, fused=not mixed)
        schedule = scheduler_for(optimizer, self.schedule, self.trainer.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def scheduler_for(optimizer: torch.optim.Optimizer, schedule: AdamWSchedule, max_steps: int):
    """The per-step learning-rate scheduler of ``schedule`` for a run of ``max_steps``."""
    if schedule.matrices == "adamw" and schedule.decay_steps is None:
        return warmup_cosine(optimizer, schedule, max_steps)  # the AdamW recipe's, built as it always was
    return lr_schedule(optimizer, schedule, max_steps)


def warmup_cosine(optimizer: torch.optim.Optimizer, schedule: AdamWSchedule, max_steps: int):
    """The AdamW recipe's schedule as it has always been built (LinearLR then CosineAnnealingLR), so its runs and
    the checkpoints they resume from step exactly as before."""
    o = schedule
    total = max(max_steps, 1)
    warmup = min(o.warmup_steps, total - 1)
    warm = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1.0 / max(warmup, 1), total_iters=max(warmup, 1))
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=max(total - warmup, 1), eta_min=o.lr * o.min_lr_ratio
    )
    return torch.optim.lr_scheduler.SequentialLR(optimizer, [warm, cosine], milestones=[max(warmup, 1)])
