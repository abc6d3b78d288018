"""The results.json record of a finished run, and the test mistakes beside it.

Keys are an interface (sweep summaries, reports, users' scripts read them): add, never rename or drop.
"""

from __future__ import annotations

import torch

from data.build import format_dict
from data.text import answer_text, as_json, parse_answer
from model.device import device_name
from storage.rundir import RunDir
from training.module import CalculatorModule


def run_record(
    module: CalculatorModule, trainer, datamodule, test: dict, cfg, train_seconds: float, run_dir: str
) -> dict:
    """What the run learned, on what, and how fast (``test``: trainer.test's metrics)."""
    net, fmt = module.net, module.fmt
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else None
    steps, processes = trainer.global_step, trainer.world_size
    tokens = steps * datamodule.data.batch_size * processes * (fmt.seq_len - 1)
    return {
        "status": "ok",
        "test_exact_match": test["test/exact_match"],
        "test_digit_accuracy": test["test/digit_accuracy"],
        "test_loss": test["test/loss"],
        "val_exact_match": float(trainer.checkpoint_callback.best_model_score) if best else None,
        "n_test": len(datamodule.held_out_set("test")),
        "n_params": net.n_params,
        "attention_params": sum(p.numel() for b in net.blocks for p in b.attn.parameters()),
        "d_model": net.cfg.d_model,
        "n_heads": net.cfg.n_heads,
        "n_kv_heads": net.cfg.n_kv_heads or net.cfg.n_heads,
        "head_dim": net.cfg.head_dim,
        "n_layers": net.cfg.n_layers,
        "data": format_dict(fmt),
        "seed": cfg.seed,
        "steps": steps,
        "processes": processes,
        "device": device_name(module.device),
        "precision": str(trainer.precision),
        "compile": cfg.compile,
        "train_seconds": round(train_seconds, 2),
        "tokens_per_second": round(tokens / train_seconds) if train_seconds > 0 else 0,
        "checkpoint": best or None,
        "resumed_from": cfg.resume,
        "run_dir": run_dir,
    } | own_block_record(net.cfg.attention, run_dir)


def own_block_record(own, run_dir: str) -> dict:
    """results.json's ``attention_block`` for a learner's block (model/own_block.py's OwnBlock), {} for ours."""
    if own is None:
        return {}
    source = str(RunDir(run_dir).attention_block)
    return {"attention_block": {"spec": own.spec, "sha256": own.sha256, "mask": own.mask, "source": source}}


@torch.no_grad()
def test_mistakes(
    module: CalculatorModule, test_set: torch.Tensor, limit: int = 50, found: list[tuple] | None = None
) -> dict:
    """The first ``limit`` held-out problems the model gets wrong under greedy decoding, as calc.py shows them.

    found: (problems, answers written) batches holding every problem of ``test_set`` that the test got wrong, in
    order (``module.test_wrong`` after a one-process test); None: find them here.
    """
    from data.division import tokenizer_for

    fmt, id_to_token = module.fmt, tokenizer_for(module.fmt).id_to_token
    if found is None:
        module.eval()
        found = []
        for seqs in test_set.split(5000):
            seqs = seqs.to(module.device)
            found.append(module.mistakes(seqs, module.greedy_answers(seqs)))
    n_wrong = sum(len(seqs) for seqs, _ in found)
    wrong = []
    for seqs, answers in found:
        seqs = seqs[: max(limit - len(wrong), 0)]
        prompts, truths = seqs[:, 1 : fmt.prompt_len - 1].tolist(), fmt.answer_of(seqs).tolist()  # a op b, zero-padded
        for prompt_ids, truth_ids, answer in zip(prompts, truths, answers.tolist(), strict=False):
            prompt = "".join(id_to_token[t] for t in prompt_ids)
            written = "".join(id_to_token[t] for t in answer)
            truth_text = "".join(id_to_token[t] for t in truth_ids)
            op = next((c for c in prompt if c in "-*/"), "+")  # the problem's operator (a sum's: '+')
            truth = parse_answer(fmt, truth_text, op)
            try:
                model = parse_answer(fmt, written, op)
            except (ValueError, IndexError):
                model = None
            wrong.append(
                {
                    "problem": _natural(prompt),
                    "model": as_json(model),
                    "model_text": written,
                    "truth": as_json(truth),
                    "truth_text": truth_text,  # as the model should have written it (working included)
                }
            )
    by_place = wrong_digits_by_place(fmt, wrong)
    return {"n_test": len(test_set), "n_mistakes": n_wrong, "mistakes": wrong, "wrong_digits_by_place": by_place}


def wrong_digits_by_place(fmt, mistakes: list[dict]) -> list[int]:
    """How many of the recorded mistakes got each answer place wrong, in the order the model writes them."""
    by_place = [0] * fmt.answer_len
    for m in mistakes:
        truth = m.get("truth_text") or answer_text(fmt, m["truth"])  # recorded before show_work: no truth_text
        written = (m.get("model_text") or "").ljust(len(truth))
        for i, (got, want) in enumerate(zip(written, truth, strict=False)):
            by_place[i] += got != want
    return by_place


def _natural(padded: str) -> str:
    """'007+045' -> '7+45' (and '01+20+03' -> '1+20+3', a sum of many operands)."""
    for op in "+-*/":
        if op in padded:
            return op.join(str(int(x)) for x in padded.split(op))
    return padded
