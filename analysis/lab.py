"""The lab: a run's model carried in its own page, where a learner types a problem and switches heads off.

``lab_payload`` packs what the page's forward pass (analysis/lab.js) needs, read from the checkpoint alone:

    weights     every parameter, float32, base64 (little-endian), by its state-dict name
    positions   what each position of the trained layout adds to its token, (T, d_model): learned positions,
                place embeddings and coupling folded into one table (``model.positions.position_table``)
    scores      per layer, what the position schemes add to the attention scores, (n_heads, T, T) with -inf
                where a key is hidden (relative place scores, the window), or absent
    query_scale (T,) each query's factor (log-scaled softmax), or absent
    means       each head's mean output before W_o, (n_layers, n_heads, T, head_dim), over ``N_MEANS`` problems drawn
                as the format draws them (seed 0): what "mean" switches a head to
    format      how a problem is written: width, operators, answer order, the working's length, the vocabulary

The tables are computed for the whole trained sequence; a causal model's prefix reads their top-left corner, so
the page runs any prompt of the trained layout exactly as ``model/`` does. Everything is data: the page
instantiates nothing but its own code.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import torch

from data.problems import ProblemFormat
from model.hooks import hook_name
from model.positions import attention_terms
from model.transformer import Transformer

N_MEANS = 1000  # problems the heads' means are taken over
LAB_JS = Path(__file__).with_name("lab.js")


def packed(t: torch.Tensor) -> dict:
    """A tensor as {shape, data}: float32, little-endian, base64."""
    values = t.detach().to("cpu", torch.float32).contiguous()
    return {"shape": list(values.shape), "data": base64.b64encode(values.numpy().astype("<f4").tobytes()).decode()}


@torch.no_grad()
def head_means(net: Transformer, fmt: ProblemFormat, vocab: dict[str, int], n: int = N_MEANS) -> torch.Tensor:
    """(n_layers, n_heads, T, head_dim): each head's mean output at each position over ``n`` drawn problems (the
    mean ablation's own :func:`analysis.engine.evaluator.head_means`, over these problems)."""
    from analysis.engine.cache import run_with_cache
    from analysis.engine.evaluator import head_means as means_of
    from data.problems import ProblemEncoder

    a, op_idx, b = fmt.draws.random_problems(n, torch.Generator().manual_seed(0))
    seqs = ProblemEncoder(fmt, vocab).encode(a, op_idx, b)
    names = [hook_name(layer, "attn.hook_z") for layer in range(net.cfg.n_layers)]
    return means_of(run_with_cache(net, seqs[:, :-1], names))


@torch.no_grad()
def lab_payload(net: Transformer, fmt: ProblemFormat, vocab: dict[str, int]) -> dict:
    """What the page's lab needs to run ``net`` on problems written as ``fmt`` with ``vocab``."""
    net = net.eval()
    T = fmt.seq_len - 1  # the longest input: the whole sequence but its [EOS]
    biases, scale = attention_terms(net, T, T, None, torch.device("cpu"))
    cfg = net.cfg
    return {
        "config": {
            "d_model": cfg.d_model,
            "n_heads": cfg.n_heads,
            "n_kv_heads": cfg.n_kv_heads or cfg.n_heads,
            "n_layers": cfg.n_layers,
            "head_dim": cfg.head_dim,
            "vocab_size": cfg.vocab_size,
            "bias": cfg.bias,
        },  # fmt: skip
        "format": {
            "digits": fmt.digits,
            "operators": fmt.operators,
            "reverse_answer": fmt.reverse_answer,
            "signed": fmt.signed,
            "answer_len": fmt.answer_len,
            "result_len": fmt.result_len,
            "prompt_len": fmt.prompt_len,
            "larger_first": fmt.larger_first,
            "vocab": vocab,
        },  # fmt: skip
        "weights": {name: packed(p) for name, p in net.state_dict().items() if p.is_floating_point()},
        "positions": packed(net.positions(0, T)),
        "scores": [None if b is None else packed(b.reshape(cfg.n_heads, T, T)) for b in biases],
        "query_scale": None if scale is None else packed(scale.reshape(T)),
        "means": packed(head_means(net, fmt, vocab)),
    }


def lab_for_run(run_dir) -> dict:
    """The lab's payload for a run directory's best checkpoint, or {"error": why} in one line (the page then says
    why and draws the rest)."""
    from model.checkpoint import CheckpointError, build_network, load_tokenizer, read_checkpoint
    from storage.messages import one_line

    try:
        ckpt, saved = read_checkpoint(run_dir)
        net, tokenizer = build_network(saved, ckpt), load_tokenizer(ckpt)
        return lab_payload(net, ProblemFormat(**saved["hyper_parameters"]["fmt"]), tokenizer.vocab)
    except (CheckpointError, OSError, KeyError, TypeError, ValueError) as e:
        return {"error": f"the lab cannot run this model: {one_line(e, sentence=True)}"}


def lab_page(payload: dict, title: str = "tinycalc lab") -> str:
    """A page holding the lab alone (the run's report.html carries it among its sections): for the tests, the
    benchmark and notebook 02's model. The payload is inlined as data, the script as code; nothing else is
    requested."""
    data = json.dumps(payload, separators=(",", ":")).replace("<", "\\u003c")
    script = LAB_JS.read_text().replace("</script", "<\\/script")
    return (
        f"<!doctype html><meta charset=utf-8><title>{title}</title><body><div id=lab></div>"
        f"<script>{script}</script><script>const M = TinycalcLab.load({data});\n"
        "TinycalcLab.render(document.getElementById('lab'), M); document.body.dataset.ready = 1;</script></body>"
    )
