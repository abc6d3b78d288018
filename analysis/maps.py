"""Per-head attention maps of a few probe problems: what the figures and the page draw, computed from the cache.

Used by the training callback (maps as the model learns) and by the end-of-run analysis (final maps).
"""

from __future__ import annotations

import torch

from analysis.engine.cache import ActivationCache, run_with_cache
from data.division import tokenizer_for
from data.expressions import ExpressionError, parse_expression
from data.positions import positions, token_labels
from data.problems import ProblemEncoder, ProblemFormat
from data.short_operand import b_digits
from data.text import encode_problems
from model.hooks import hook_name


def probe_sequences(module, probes: list[str]) -> torch.Tensor:
    """Probe problems like '456+789' -> (n_probes, seq_len) token ids with their true answers."""
    problems = []
    for text in probes:
        try:
            problems.append(parse_expression(str(text), module.fmt))
        except ExpressionError as e:
            raise ValueError(f"probe {text!r}: {e}") from None
    return encode_problems(ProblemEncoder(module.fmt, tokenizer_for(module.fmt).vocab), problems)


def checked_probes(module, probes: list[str] | None) -> list[str]:
    """The probe problems (None: the task's own), checked against the model's format (ValueError naming the
    bad one, as ``probes: ...``: the config key's message)."""
    probes = probes or default_probes(module.fmt)
    try:
        probe_sequences(module, probes)
    except ValueError as e:
        raise ValueError(f"probes: {e}") from None
    return probes


def attention_maps(fmt: ProblemFormat, probes: list[str], seqs: torch.Tensor, cache: ActivationCache) -> dict:
    """The probes' attention as plain data: {"probes", "tokens" (row labels), "key_labels",
    "weights": [layer][probe][head][query][key]}; ``cache`` holds the probes' pass over seqs[:, :-1]."""
    tokenizer = tokenizer_for(fmt)
    weights = cache.stack("attn.hook_pattern").float().cpu()  # (n_layers, n_probes, n_heads, T, T)
    return {
        "probes": list(probes),
        "tokens": [token_labels([tokenizer.id_to_token[i] for i in row]) for row in seqs[:, :-1].tolist()],
        "key_labels": [p.short for p in positions(fmt)][:-1],  # inputs stop before [EOS]
        "weights": [
            [[[[round(x, 4) for x in row] for row in head] for head in probe] for probe in layer]
            for layer in weights.tolist()
        ],
    }


def probe_maps(module, probes: list[str]) -> dict:
    """The probes' attention maps from one cached pass of the module's network (training-time snapshots)."""
    seqs = probe_sequences(module, probes).to(module.device)
    was_training = module.net.training
    module.net.eval()
    names = [hook_name(i, "attn.hook_pattern") for i in range(len(module.net.blocks))]
    cache = run_with_cache(module.net, seqs[:, :-1], names)
    module.net.train(was_training)
    return attention_maps(module.fmt, probes, seqs, cache)


def default_probes(fmt) -> list[str]:
    """Problems that make carries (or borrows) ripple through every place, for any digit count; a division's, a
    quotient digit at every place."""
    d, probes, short = fmt.digits, [], b_digits(fmt)  # short: a b drawn short (data/short_operand.py), or 0
    run = lambda start: "".join(str((start + i) % 10) for i in range(d))  # noqa: E731  e.g. 456 for d=3
    for op in fmt.operators:
        if op == "+":
            probes += [f"{'9' * d}+1", f"{run(4)}+{run(7)}"]
        elif op == "-":
            probes += [f"1{'0' * (d - 1)}-1" if d > 1 else "1-1", f"{run(1)}-{run(4)}"]
        elif op == "*":
            probes += [f"{'9' * d}*{'9' * (short or d)}", f"{run(1)}*{run(4)[: short or d]}"]
        else:  # a registered operation's, b never 0 ('/': every place of a quotient, a remainder left)
            probes += [f"{'9' * d}{op}7", f"{run(1)}{op}{run(4)[: short or d].lstrip('0') or '7'}"]
    return probes[:4]
