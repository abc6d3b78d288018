"""Per-head attention maps of a few probe problems: PNG grids, raw weights as JSON, wandb images.

Used by the training callback (maps as the model learns) and by the end-of-run analysis (final maps).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from analysis.plots import attention_grid
from data.expressions import ExpressionError, parse_expression
from data.positions import positions, token_labels
from data.problems import ProblemEncoder
from data.tokenizer import CharTokenizer
from model.module import CalculatorModule
from training.loggers import wandb_loggers


def probe_sequences(module: CalculatorModule, probes: list[str]) -> torch.Tensor:
    """Probe problems like '456+789' -> (n_probes, seq_len) token ids with their true answers."""
    problems = []
    for text in probes:
        try:
            problems.append(parse_expression(str(text), module.fmt))
        except ExpressionError as e:
            raise ValueError(f"probe {text!r}: {e}") from None
    return ProblemEncoder(module.fmt, CharTokenizer().vocab).encode_problems(problems)


@torch.no_grad()
def draw_attention_maps(
    module: CalculatorModule, probes: list[str], out_dir: Path, tag: str, loggers=(), step: int | None = None
) -> list[Path]:
    """Write attention/<tag>_layer<i>.png for every layer and attention/<tag>.json; log images to wandb."""
    seqs = probe_sequences(module, probes).to(module.device)
    was_training = module.training
    module.eval()
    _, weights = module.net(seqs[:, :-1], need_weights=True)  # n_layers x (n_probes, n_heads, T, T)
    module.train(was_training)
    weights = [w.float().cpu() for w in weights]
    tokenizer = CharTokenizer()
    labels = [token_labels([tokenizer.id_to_token[i] for i in row]) for row in seqs[:, :-1].tolist()]
    key_labels = [p.short for p in positions(module.fmt)][:-1]  # inputs stop before [EOS]
    paths = [
        attention_grid(w.numpy(), labels, key_labels, layer, tag, out_dir / f"{tag}_layer{layer}.png")
        for layer, w in enumerate(weights)
    ]
    raw = {
        "tag": tag,
        "step": step,
        "probes": probes,
        "tokens": labels,
        "weights": [
            [[[[round(x, 4) for x in row] for row in head] for head in probe] for probe in w.tolist()] for w in weights
        ],
    }  # [layer][probe][head][query][key]
    raw_path = out_dir / f"{tag}.json"
    raw_path.write_text(json.dumps(raw))
    for logger in wandb_loggers(loggers):
        for layer, path in enumerate(paths):
            logger.log_image(key=f"attention/layer{layer}", images=[str(path)], caption=[tag], step=step)
        logger.experiment.save(str(raw_path), base_path=str(out_dir.parent), policy="now")
    return paths


def default_probes(fmt) -> list[str]:
    """Problems that make carries (or borrows) ripple through every place, for any digit count."""
    d, probes = fmt.digits, []
    run = lambda start: "".join(str((start + i) % 10) for i in range(d))  # noqa: E731  e.g. 456 for d=3
    for op in fmt.operators:
        if op == "+":
            probes += [f"{'9' * d}+1", f"{run(4)}+{run(7)}"]
        elif op == "-":
            probes += [f"1{'0' * (d - 1)}-1" if d > 1 else "1-1", f"{run(1)}-{run(4)}"]
        else:
            probes += [f"{'9' * d}*{'9' * d}", f"{run(1)}*{run(4)}"]
    return probes[:4]
