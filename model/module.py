"""LightningModule: trains the transformer on answer tokens; validates teacher-forced, tests by greedy decoding."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import lightning as L
import torch
import torch.nn.functional as F

from data.positions import place_ids
from data.problems import ProblemFormat
from model.transformer import Transformer, TransformerConfig

COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")  # torch.compile
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes that capture CUDA graphs on a GPU


@dataclass(frozen=True)
class AdamWSchedule:
    """AdamW with linear warmup, then cosine decay to ``lr * min_lr_ratio`` at the last step."""

    lr: float = 3e-3
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1

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
        if not isinstance(self.warmup_steps, int) or isinstance(self.warmup_steps, bool) or self.warmup_steps < 0:
            raise ValueError(f"warmup_steps={self.warmup_steps!r}: must be a whole number >= 0")
        if not (number(self.min_lr_ratio) and 0 <= self.min_lr_ratio <= 1):
            raise ValueError(f"min_lr_ratio={self.min_lr_ratio!r}: must be a number in [0, 1]")

    def to_dict(self) -> dict:
        return {**asdict(self), "betas": list(self.betas)}


def adamw(model: torch.nn.Module, lr: float, weight_decay: float, betas, fused: bool = True) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on biases and LayerNorm gains), fused into one kernel
    for all tensors where torch can (~4% of a CPU step). Mixed precision needs ``fused=False``: Lightning
    clips gradients itself and refuses an optimizer that unscales them inside its step."""
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    device = next(model.parameters()).device.type
    return torch.optim.AdamW(
        [{"params": matrices, "weight_decay": weight_decay}, {"params": vectors, "weight_decay": 0.0}],
        lr=lr,
        betas=tuple(betas),
        fused=fused and device in ("cpu", "cuda"),
    )


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
        self.net = Transformer(TransformerConfig(**model), place_ids=place_ids(self.fmt))
        self.val_history: list[dict] = []  # one entry per validation: step, exact_match, loss
        self.compile_mode = compile
        self.training_loss = self.teacher_forced_loss  # compiled in setup("fit") when asked

    # ---- the two ways of reading a batch ------------------------------------------------------------
    def forced_scores(self, seq: torch.Tensor):
        """One teacher-forced pass -> (loss on the answer and [EOS] tokens, (B,) whole answer is argmax).

        A greedy decoder writes the whole answer right exactly when every answer token is the argmax
        given the true tokens before it, so the second value is greedy exact-match at the cost of one pass.
        """
        return self.answer_scores(self.answer_logits(seq), seq)

    def teacher_forced_loss(self, seq: torch.Tensor) -> torch.Tensor:
        """The training loss: cross-entropy on seq's answer and [EOS] tokens, teacher-forced."""
        return self.forced_scores(seq)[0]

    def answer_logits(self, seq: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (B, answer_len + 1, vocab) predicting seq's answer and [EOS] tokens."""
        return self.net(seq[:, :-1], logits_from=self.answer_logits_from)[0]

    @property
    def answer_logits_from(self) -> int:
        """The position whose next-token logits predict the first answer token (the '=' sign)."""
        return self.fmt.prompt_len - 1

    def answer_scores(self, logits: torch.Tensor, seq: torch.Tensor):
        """Logits (B, answer_len + 1, vocab) of seq's positions answer_logits_from.. -> (loss on the answer and
        [EOS], (B,) every answer token is the argmax)."""
        A = self.fmt.answer_len
        target = seq[:, self.fmt.prompt_len :]  # the answer and [EOS]
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten())
        return loss, (logits[:, :A].argmax(-1) == target[:, :A]).all(dim=1)

    def decode_answers(self, seq: torch.Tensor) -> torch.Tensor:
        """Greedy answers (B, answer_len) for the prompts in ``seq``, decoded with the KV cache."""
        return self.net.generate(seq[:, : self.fmt.prompt_len], self.fmt.answer_len)

    def score(self, seq: torch.Tensor, greedy: bool = True) -> dict[str, torch.Tensor]:
        """loss, exact_match (whole answer right) and digit_accuracy (per answer position); the answer is every
        token the model writes, the working included when the format shows it.

        greedy: decode the answers, as a user of the model gets them. Otherwise read them off the one
        teacher-forced pass that gives the loss: the same exact-match (see ``forced_scores``) for less than
        half the cost, with digit accuracy then counting each digit given the true digits before it.
        """
        P, A = self.fmt.prompt_len, self.fmt.answer_len
        logits = self.answer_logits(seq)
        loss, _ = self.answer_scores(logits, seq)
        answers = self.decode_answers(seq) if greedy else logits[:, :A].argmax(-1)
        right = answers == seq[:, P : P + A]  # (B, A)
        return {"loss": loss, "exact_match": right.all(dim=1).float().mean(), "digit_accuracy": right.float().mean()}

    # ---- Lightning hooks ----------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        if stage == "fit" and self.compile_mode:
            # the loss function, not the module: the state dict keeps its keys, and eval paths stay eager
            self.training_loss = torch.compile(self.teacher_forced_loss, mode=self.compile_mode)

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        if self.compile_mode in CUDA_GRAPH_MODES:
            torch.compiler.cudagraph_mark_step_begin()  # a new step: the last step's graph outputs may be reused
        loss = self.training_loss(batch)
        # logged at the loggers' pace, not every step: each self.log costs Lightning a walk over its result object
        # (host time a GPU step cannot spare), and a prog_bar=True value would be read back from the device every
        # step; the bar shows it at the same pace (training/callbacks.py: StepProgressBar)
        if (self.global_step + 1) % self.trainer.log_every_n_steps == 0:  # this step ends at a multiple of n
            self.log("train/loss", loss)
        return loss

    def _eval_step(self, batch: torch.Tensor, split: str) -> None:
        # validation runs often during training: teacher-forced; the test decodes greedily
        for name, value in self.score(batch, greedy=split == "test").items():
            self.log(f"{split}/{name}", value, prog_bar=name == "exact_match", batch_size=len(batch), sync_dist=True)

    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        self._eval_step(batch, "val")

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

    def test_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def configure_optimizers(self):
        o = self.schedule
        mixed = str(self.trainer.precision).endswith("-mixed")
        optimizer = adamw(self, o.lr, o.weight_decay, o.betas, fused=not mixed)
        total = max(self.trainer.max_steps, 1)
        warmup = min(o.warmup_steps, total - 1)
        warm = torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=1.0 / max(warmup, 1), total_iters=max(warmup, 1)
        )
        cosine = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=max(total - warmup, 1), eta_min=o.lr * o.min_lr_ratio
        )
        schedule = torch.optim.lr_scheduler.SequentialLR(optimizer, [warm, cosine], milestones=[max(warmup, 1)])
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
