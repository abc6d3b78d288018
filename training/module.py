"""LightningModule: trains the transformer on answer tokens; validates teacher-forced, tests by greedy decoding."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import torch

from data.problems import ProblemFormat, answer_scores
from model.transformer import Transformer


class CalculatorModule(L.LightningModule):
    """Trains ``net`` (a :class:`Transformer`) on problems written as ``fmt`` (a :class:`ProblemFormat`: where the
    answer sits). ``optimizer``: the recipe, handed in ready to call -- ``optimizer(module, max_steps, fused)`` ->
    (optimizer, per-step schedule) -- built from configs/optim (training/optim.py), so this file never reads the
    recipe. ``hparams``: the settings (model, fmt, optim dicts) the net, the format and the recipe were built from,
    saved in the checkpoint: what training/load.py rebuilds a module from. ``compile=``: training/compiling.py;
    each step's random draws seeded for exact resume: training/step_seeds.py."""

    def __init__(
        self,
        net: Transformer,
        fmt: ProblemFormat,
        optimizer: Callable | None = None,
        hparams: dict | None = None,
    ):
        super().__init__()
        self.save_hyperparameters(hparams or {}, logger=False)  # the loggers get config.yaml (training/run.py)
        self.net, self.fmt, self.optimizer = net, fmt, optimizer
        self.val_history: list[dict] = []  # one entry per validation: step, exact_match, loss
        self.training_loss = self.teacher_forced_loss  # what compile= replaces (training/compiling.py)
        self.widths = None  # mixed_widths training: a batch's format from its length (training/assemble.py)

    # ---- reading a batch: the loss on its answers, and the answers written -------------------------
    def layout(self, seq: torch.Tensor) -> ProblemFormat:
        """The format of a batch: the trained one, or, for a batch of another width (``mixed_widths`` training),
        the one ``widths`` gives for its length (data/mixing.py's width_of)."""
        return self.fmt if seq.shape[1] == self.fmt.seq_len else self.widths(self.fmt, seq.shape[1])

    def training_places(self, seq: torch.Tensor) -> torch.Tensor | None:
        """A training batch's place ids (B, seq_len) from the net's position scheme; None for learned positions."""
        return None if self.net.places is None else self.net.places.training_places(seq, self.fmt, self.layout(seq))

    def answer_logits(self, seq: torch.Tensor, places: torch.Tensor | None = None, prompt_len: int | None = None):
        """Teacher-forced logits (B, answer_len + 1, vocab) predicting seq's answer and [EOS] tokens; ``places``:
        (B, seq_len) place ids (None: the trained layout's, as every evaluation reads it)."""
        P = self.layout(seq).prompt_len if prompt_len is None else prompt_len
        return self.net(seq[:, :-1], logits_from=P - 1, places=places)[0]

    def teacher_forced_loss(self, seq: torch.Tensor, places: torch.Tensor | None = None, prompt_len: int | None = None):
        """The training loss: cross-entropy on seq's answer and [EOS] tokens, teacher-forced. ``prompt_len``: the
        batch's (None: looked up from its width); the compiled training step passes it, so the lookup stays out
        of the graph and one graph serves every width of ``mixed_widths`` training."""
        return answer_scores(self.answer_logits(seq, places, prompt_len), seq)[0]

    def forced_scores(self, seq: torch.Tensor):
        """One teacher-forced pass -> (loss on the answer and [EOS] tokens, (B,) greedy exact-match): see
        :func:`answer_scores`."""
        return answer_scores(self.answer_logits(seq), seq)

    def decode_answers(self, seq: torch.Tensor) -> torch.Tensor:
        """Greedy answers (B, answer_len) for the prompts in ``seq``, decoded with the KV cache."""
        return self.net.generate(self.fmt.prompt_of(seq), self.fmt.answer_len)

    def greedy_answers(self, seq: torch.Tensor, logits: torch.Tensor | None = None) -> torch.Tensor:
        """The answers (B, answer_len) greedy decoding writes for seq's prompts, for one teacher-forced pass
        (``logits``, when the caller has them) plus decoding only the problems that pass gets wrong: greedy writes
        the true answer exactly when every true answer token is the argmax (see ``forced_scores``)."""
        logits = self.answer_logits(seq) if logits is None else logits
        wrong = ~self.fmt.exact_match(self.fmt.forced_answers(logits), seq)
        answers = self.fmt.answer_of(seq).clone()
        if wrong.any():
            answers[wrong] = self.decode_answers(seq[wrong])
        return answers

    def mistakes(self, seq: torch.Tensor, answers: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The problems of ``seq`` whose ``answers`` (B, answer_len) are wrong, and those answers."""
        wrong = ~self.fmt.exact_match(answers, seq)
        return seq[wrong], answers[wrong]

    def score(self, seq: torch.Tensor, greedy: bool = True) -> dict[str, torch.Tensor]:
        """loss, exact_match (whole answer right) and digit_accuracy (per answer token, the working included).
        greedy: decode the answers, as a user of the model gets them; else read them off the teacher-forced pass
        that gives the loss: the same exact-match (see ``forced_scores``) for less than half the cost, digit
        accuracy then counting each token given the true ones before it."""
        return self._score(seq, greedy)[0]

    def _score(self, seq: torch.Tensor, greedy: bool) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """score's values, and the (B, answer_len) answers they judge."""
        logits = self.answer_logits(seq)
        loss, _ = answer_scores(logits, seq)
        answers = self.greedy_answers(seq, logits) if greedy else self.fmt.forced_answers(logits)
        exact, digits = self.fmt.judge(answers, seq)  # (B,), (B, answer_len)
        return {"loss": loss, "exact_match": exact.float().mean(), "digit_accuracy": digits.float().mean()}, answers

    # ---- Lightning hooks ----------------------------------------------------------------------------
    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        loss = self.training_loss(batch, self.training_places(batch), self.layout(batch).prompt_len)
        # logged at the loggers' pace: each self.log costs Lightning host time a GPU step cannot spare, and a
        # prog_bar value would be read back every step (the bar shows it at this pace: training/callbacks.py)
        if (self.global_step + 1) % self.trainer.log_every_n_steps == 0:  # this step ends at a multiple of n
            self.log("train/loss", loss)
        return loss

    def _log_scores(self, metrics: dict[str, torch.Tensor], split: str, batch_size: int) -> None:
        for name, value in metrics.items():  # sync_dist: DDP's processes score their own shares
            self.log(f"{split}/{name}", value, prog_bar=name == "exact_match", batch_size=batch_size, sync_dist=True)

    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        # validation runs often during training: teacher-forced (the same exact-match, see forced_scores)
        self._log_scores(self.score(batch, greedy=False), "val", len(batch))

    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:
            metrics = self.trainer.callback_metrics
            step, exact, loss = self.global_step, metrics["val/exact_match"].item(), metrics["val/loss"].item()
            self.val_history.append({"step": step, "exact_match": exact, "loss": loss})

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
        if self.optimizer is None:
            raise ValueError("this CalculatorModule was built without an optimizer: see training/load.py")
        mixed = str(self.trainer.precision).endswith("-mixed")  # AdamW unfused there, as always (optimizer_for)
        optimizer, schedule = self.optimizer(self, self.trainer.max_steps, not mixed)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
