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
    format      how a problem is written: width, operators, answer order, the working's length, the most digits
                b may have, the vocabulary
    calc_digits the widest operands calc.py asks the model (beyond the page's trained width for a model with no
                table of places)

The tables are computed for the whole trained sequence; a causal model's prefix reads their top-left corner, so
the page runs any prompt of the trained layout exactly as ``model/`` does. Everything is data: the page
instantiates nothing but its own code.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import torch

from data.build import problem_format
from data.problems import ProblemFormat
from data.short_working import b_limit
from data.sums import SumFormat
from model.calculator import longest_digits
from model.hooks import head_label, hook_name
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

    a, op_idx, b = fmt.random_problems(n, torch.Generator().manual_seed(0))
    seqs = ProblemEncoder(fmt, vocab).encode(a, op_idx, b)
    names = [hook_name(layer, "attn.hook_z") for layer in range(net.cfg.n_layers)]
    return means_of(run_with_cache(net, seqs[:, :-1], names))


def format_of(fmt: ProblemFormat, vocab: dict[str, int]) -> dict:
    """How a problem is written, as the page reads it (analysis/lab.js names its positions from this)."""
    return {
        "digits": fmt.digits,
        "operators": fmt.operators,
        "reverse_answer": fmt.reverse_answer,
        "signed": fmt.signed,
        "answer_len": fmt.answer_len,
        "result_len": fmt.result_len,
        "prompt_len": fmt.prompt_len,
        "larger_first": fmt.larger_first,
        "b_limit": b_limit(fmt),  # the most digits b may have (a working of a short b), 0: any
        "vocab": vocab,
    }


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
        "format": format_of(fmt, vocab),
        "calc_digits": longest_digits(net, fmt),
        "weights": {name: packed(p) for name, p in net.state_dict().items() if p.is_floating_point()},
        "positions": packed(net.positions(0, T)),
        "scores": [None if b is None else packed(b.reshape(cfg.n_heads, T, T)) for b in biases],
        "query_scale": None if scale is None else packed(scale.reshape(T)),
        "means": packed(head_means(net, fmt, vocab)),
    }


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def guided_experiments(fmt: dict, results: dict, tables: dict[str, list[dict] | None]) -> list[dict]:
    """The course's experiments, as the lab offers them on a run's page: each the problem and heads it sets, its
    question, and the test set's numbers from this run's results (``tables``: ablation.csv's and patching.csv's
    rows by name), which the page sets beside what its model does. Chosen from the run's own numbers: the head
    whose zeroing costs the most, the other head that restores the most of the digits a carry reaches, the head
    whose mean and zero differ the most, a carry patched; [] when the run has no usable ablation table."""
    digits, ops = fmt["digits"], fmt["operators"]
    intact, n = results.get("intact_exact_match"), results.get("analysis_problems")
    rows = [r for r in tables.get("ablation") or [] if _number(r.get("exact_match"))]
    zero = {head_label(r["layer"], r["head"]): r["exact_match"] for r in rows if r.get("ablation") == "zero"}
    mean = {head_label(r["layer"], r["head"]): r["exact_match"] for r in rows if r.get("ablation") == "mean"}
    if not zero or not _number(intact) or not _number(n):
        return []
    op = "+" if "+" in ops else ops[0]
    problem = f"1{'9' * (digits - 1)}{op}1"  # 199+1: a carry through every place (the lab's first problem)
    test = {"n": n, "intact": intact}
    restored: dict[str, dict[str, float]] = {}  # digit -> head -> share restored (patching.csv)
    for r in tables.get("patching") or []:
        if _number(r.get("restored")) and isinstance(r.get("digit"), str):
            restored.setdefault(r["digit"], {})[head_label(r["layer"], r["head"])] = r["restored"]
    worst = min(zero, key=zero.get)
    experiments = [{
        "kind": "off", "title": "One head off", "problem": problem, "heads": {worst: "off"}, "head": worst,
        "question": f"{worst} is the head whose loss costs this model the most on the test set. With {worst} off, "
                    f"will the model still answer {problem} right? (Once you answer, the lab switches it off.)",
        "choices": ["right", "wrong"], "test": test | {"zero": zero[worst]},
    }]  # fmt: skip
    carried = [d for d in restored if d[:1] == "r" and d[1:].isdigit() and d != "r0"]  # digits a carry reaches
    if op == "+" and carried:
        others = [h for h in zero if h != worst] or [worst]  # the head every digit needs is the first experiment's
        share = {h: sum(restored[d].get(h, 0.0) for d in carried) / len(carried) for h in others}
        carrier = max(share, key=share.get)
        experiments.append({
            "kind": "carry", "title": "Another head off", "problem": problem, "heads": {carrier: "off"},
            "head": carrier,
            "question": f"Besides {worst}, {carrier} is the head that restores the most of the digits a carry "
                        f"reaches ({', '.join(sorted(carried))}) when patched. {problem} carries through every "
                        f"place: with {carrier} off, will the model still answer it right? (Once you answer, the lab "
                        "switches it off.)",
            "choices": ["right", "wrong"],
            "test": test | {"zero": zero[carrier], "restored": {d: restored[d][carrier] for d in sorted(carried)
                                                                if carrier in restored[d]}},
        })  # fmt: skip
    if mean.keys() == zero.keys():
        gap = max(zero, key=lambda h: mean[h] - zero[h])
        experiments.append({
            "kind": "mean", "title": "Mean against zero", "problem": problem, "heads": {gap: "off"}, "head": gap,
            "question": f"{gap}'s output can be zeroed, or set to its mean (its average over the test problems). "
                        f"For {problem}, which breaks the answer? (Once you answer, the lab switches {gap} off; "
                        "click it once more for its mean.)",
            "choices": ["zero breaks it", "its mean breaks it", "both", "neither"],
            "test": test | {"zero": zero[gap], "mean": mean[gap]},
        })  # fmt: skip
    if op == "+" and "r1" in restored:
        ones = "1" * (digits - 1)  # 115+5 against 110+0: the units agree (0), only the carry into the tens differs
        experiments.append({
            "kind": "patch", "title": "Patching a carry", "problem": f"{ones}5+5", "corrupted": f"{ones}0+0",
            "heads": {},
            "question": f"{ones}5+5 carries into the tens and {ones}0+0 does not; their units agree. Which head, "
                        "its output on the first put into the run on the second, restores the most of the tens digit? "
                        "(Once you answer, the lab patches every head.)",
            "choices": sorted(zero), "test": {"restored": restored},
        })  # fmt: skip
    return experiments


def lab_for_run(run_dir) -> dict:
    """The lab's payload for a run directory's best checkpoint, or {"error": why} in one line (the page then says
    why and draws the rest)."""
    from model.checkpoint import CheckpointError, build_network, load_tokenizer, read_checkpoint
    from storage.messages import one_line

    try:
        ckpt, saved = read_checkpoint(run_dir)
        net, tokenizer = build_network(saved, ckpt), load_tokenizer(ckpt)
        fmt = problem_format(**saved["hyper_parameters"]["fmt"])
        if isinstance(fmt, SumFormat):  # the page's problems are a op b
            return {"error": f"the lab asks a op b problems; ask this model's sums of {fmt.terms} operands with "
                             "calc.py (python calc.py 12+345+6789), and score them with calc.py --eval"}  # fmt: skip
        if "/" in fmt.operators:  # the page writes and scores + - * (lab.js)
            return {"error": "the lab asks + - * problems; ask this model's divisions with calc.py (python calc.py "
                             "17/5 prints 3 r 2), and score them with calc.py --eval"}  # fmt: skip
        return lab_payload(net, fmt, tokenizer.vocab)
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
