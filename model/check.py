"""Is your attention block the lesson's? ``python -m model.check mine.py:MultiHeadAttention``

The check builds your block at the calculator's size, finds its four projections, gives them weights and copies the
same weights into the lesson's block (model/attention.py), then compares the two on one input: the output's shape,
the parameter count (4·d² + 4·d), the causal mask (a later token changed leaves every earlier output as it was) and
the output itself, to 1e-5. Where they differ it names the usual mistake, one line each with the lesson's step
(``python -m model.walkthrough`` prints the steps): each mistake is the lesson's block with that one step done
wrong, computed on the same weights, so a name is given only when it reproduces your block's output exactly.
``python train.py model.attention=...`` runs the same check before it trains, and refuses a block that fails it.
"""

from __future__ import annotations

import inspect
import math
import sys
from dataclasses import dataclass, field

import torch

from model.attention import MultiHeadAttention
from model.own_block import MASK_STYLES, BlockError, call_block, load_block, projections

TOLERANCE = 1e-5
B, T = 2, 9  # the input the block is checked on: (B, T, d_model)


@dataclass
class Finding:
    ok: bool
    line: str
    mistake: str | None = None  # the mistake named (a MISTAKES key), where one is


@dataclass
class Report:
    spec: str
    findings: list[Finding] = field(default_factory=list)
    mask: str = "keep"  # how the block reads the mask (model/own_block.py's MASK_STYLES)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    @property
    def mistakes(self) -> list[str]:
        return [f.mistake for f in self.findings if f.mistake]

    @property
    def first_failure(self) -> str | None:
        return next((f.line for f in self.findings if not f.ok), None)

    def add(self, ok: bool, line: str, mistake: str | None = None) -> bool:
        self.findings.append(Finding(ok, line, mistake))
        return ok


def lesson(x, weights, n_heads, scale=None, softmax_dim=-1, allowed="causal", split="transpose", merge="transpose",
           project_out=True) -> torch.Tensor:  # fmt: skip
    """The lesson's block on x (B, T, d) with ``weights`` ({name: (weight, bias)}), each step as the lesson writes
    it unless told otherwise: the mistakes below are this function with one argument changed."""
    Bx, Tx, d = x.shape
    hd = d // n_heads
    Q, K, V = (x @ weights[n][0].T + weights[n][1] for n in ("W_q", "W_k", "W_v"))  # (B, T, d) each
    if split == "transpose":  # (B, T, d) -> (B, T, H, hd) -> (B, H, T, hd)
        Q, K, V = (t.view(Bx, Tx, n_heads, hd).transpose(1, 2) for t in (Q, K, V))
    else:  # viewed straight as (B, H, T, hd): tokens and heads mixed
        Q, K, V = (t.reshape(Bx, n_heads, Tx, hd) for t in (Q, K, V))
    scores = Q @ K.transpose(-2, -1) / (math.sqrt(hd) if scale is None else scale)  # (B, H, T, T)
    lower = torch.ones(Tx, Tx, dtype=torch.bool)
    may_look = {
        "causal": lower.tril(), "none": lower, "upper": lower.triu(), "strict upper": lower.triu(1),
        "strict lower": lower.tril(-1),
    }[allowed]  # fmt: skip
    weights_ = scores.masked_fill(~may_look, float("-inf")).softmax(dim=softmax_dim)
    z = weights_ @ V  # (B, H, T, hd)
    if merge == "transpose":
        concat = z.transpose(1, 2).reshape(Bx, Tx, d)
    elif merge == "view":  # no transpose back: (B, H, T, hd) read as (B, T, d)
        concat = z.reshape(Bx, Tx, d)
    else:  # "interleaved": head_dim outer, heads inner
        concat = z.permute(0, 2, 3, 1).reshape(Bx, Tx, d)
    return concat @ weights["W_o"][0].T + weights["W_o"][1] if project_out else concat


# name -> (the lesson's block with that step wrong: lesson()'s arguments, the line that names it)
MISTAKES = {
    "unscaled": (
        {"scale": 1.0},
        "scores not scaled: divide Q·Kᵀ by √head_dim = {sqrt_hd:g} before the softmax (step 4, scores), or the "
        "softmax saturates",
    ),
    "scaled by d_model": (
        {"scale": "d_model"},
        "scores divided by √d_model = {sqrt_d:g}, not √head_dim = {sqrt_hd:g}: each head's dot product sums head_dim "
        "terms (step 4, scores)",
    ),
    "softmax axis": (
        {"softmax_dim": -2},
        "softmax over the wrong axis: each query's weights must sum to 1 over the keys, softmax(scores, dim=-1) "
        "(step 6, softmax over the keys)",
    ),
    "mask missing": (
        {"allowed": "none"},
        "no causal mask: a token attends to the tokens after it (step 5, causal mask): the scores of later keys "
        "must be -inf before the softmax",
    ),
    "mask reversed": (
        {"allowed": "upper"},
        "the mask is the wrong way round: a token attends to the tokens after it, not before (step 5, causal "
        "mask): keep the lower triangle, torch.tril",
    ),
    "mask reversed, NaN": (
        {"allowed": "strict upper"},
        "the mask is the wrong way round, and the last row is all -inf, so softmax gives NaN there (step 5, causal "
        "mask): hide the later tokens only, torch.triu(..., diagonal=1)",
    ),
    "-inf row": (
        {"allowed": "strict lower"},
        "a token is hidden from itself: the first row of the scores is all -inf and softmax gives NaN (step 5, "
        "causal mask): the diagonal stays visible, hide torch.triu(..., diagonal=1)",
    ),
    "split without transpose": (
        {"split": "view"},
        "heads split without transpose: view (B, T, d_model) as (B, T, n_heads, head_dim), then transpose(1, 2) "
        "(steps 2-3); viewing it straight as (B, n_heads, T, head_dim) mixes the tokens",
    ),
    "merge without transpose": (
        {"merge": "view"},
        "heads concatenated without transposing back: (B, n_heads, T, head_dim).transpose(1, 2), then "
        ".contiguous().view(B, T, d_model) (step 8, concatenate)",
    ),
    "heads in the wrong order": (
        {"merge": "interleaved"},
        "heads concatenated in the wrong order: each head's head_dim values sit side by side, head 0 first -- "
        "(B, T, n_heads, head_dim).view(B, T, d_model) (step 8, concatenate)",
    ),
    "W_o not applied": (
        {"project_out": False},
        "W_o not applied: the block returns the concatenated heads; return self.W_o(concat) (step 9, W_o)",
    ),
}
NOT_CONTIGUOUS = (
    "view without contiguous: after transpose(1, 2) the tensor is not laid out in order, so .view fails; "
    ".contiguous().view(B, T, d_model), or .reshape (step 8, concatenate)"
)


def seeded_weights(block, names: dict[str, str], d: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Weights large enough that every step shows (scores of a few units), set into the block's projections; the
    lesson's (weight, bias) for each, a bias the block lacks as zeros."""
    g = torch.Generator().manual_seed(0)
    weights = {}
    with torch.no_grad():
        for ours, theirs in names.items():
            linear = getattr(block, theirs)
            w = torch.randn(d, d, generator=g) * (1.7 / math.sqrt(d))
            b = torch.randn(d, generator=g) * 0.1 if linear.bias is not None else torch.zeros(d)
            linear.weight.copy_(w)
            if linear.bias is not None:
                linear.bias.copy_(b)
            weights[ours] = (w, b)
    return weights


def reference_output(x: torch.Tensor, weights: dict, n_heads: int) -> torch.Tensor:
    """The lesson's block itself (model/attention.py) on x with these weights: what a correct block gives."""
    attn = MultiHeadAttention(x.shape[-1], n_heads).eval()
    with torch.no_grad():
        for name, (w, b) in weights.items():
            getattr(attn, name).weight.copy_(w)
            getattr(attn, name).bias.copy_(b)
        return attn(x)[0]


def difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest |a - b|, NaN where only one side has it counting as infinite."""
    if a.shape != b.shape:
        return math.inf
    both = torch.isnan(a) & torch.isnan(b)
    if (torch.isnan(a) ^ torch.isnan(b)).any():
        return math.inf
    gap = (a - b).abs().masked_fill(both, 0.0)
    return float(gap.nan_to_num(math.inf).max()) if gap.numel() else 0.0


def check_block(cls_or_spec, d_model: int = 64, n_heads: int = 4) -> Report:
    """Every check of the module's doc on a block class (or a FILE.py:CLASS spec), in order: it is built, its
    projections are the lesson's, then it computes the lesson's block (each check runs where the earlier ones leave
    something to check)."""
    report = Report(cls_or_spec if isinstance(cls_or_spec, str) else cls_or_spec.__name__)
    try:
        cls = load_block(cls_or_spec)[0] if isinstance(cls_or_spec, str) else cls_or_spec
        block = cls(d_model, n_heads).eval()
    except BlockError as e:
        report.add(False, str(e), "load")
        return report
    except Exception as e:  # noqa: BLE001 -- the learner's __init__ may raise anything
        report.add(False, f"{cls.__name__}({d_model}, {n_heads}) raised {type(e).__name__}: {e}", "build")
        return report
    report.add(True, f"builds as {cls.__name__}(embed_dim={d_model}, num_heads={n_heads})")
    names = check_structure(report, block, d_model)
    if names is not None:
        check_behaviour(report, block, seeded_weights(block, names, d_model), n_heads)
    return report


def check_structure(report: Report, block, d: int) -> dict[str, str] | None:
    """Its forward's arguments, its four projections and their sizes, its parameter count: the lesson's name of
    each projection -> the block's, or None once one of them is not the lesson's."""
    takes = [p for p in inspect.signature(block.forward).parameters.values() if p.default is p.empty]
    if len(takes) > 1 and takes[1].kind is not inspect.Parameter.VAR_POSITIONAL:  # forward(q, k, v, mask): 3 inputs
        report.add(
            False,
            f"forward takes ({', '.join(p.name for p in takes)}): the calculator's block attends to itself, so it is "
            "called as forward(x, mask=...); write def forward(self, x, mask=None) and project x three times",
            "signature",
        )
        return None
    try:
        names = projections(block)
    except BlockError as e:
        report.add(False, str(e), "W_o missing" if str(e).startswith("W_o missing") else "projections")
        return None
    shapes = {ours: tuple(getattr(block, theirs).weight.shape) for ours, theirs in names.items()}
    square = all(s == (d, d) for s in shapes.values())
    found = ", ".join(f"{n} {s[1]}->{s[0]}" for n, s in shapes.items())
    if not report.add(
        square,
        f"W_q W_k W_v W_o: nn.Linear({d}, {d}) each" if square
        else f"{found}: each projection must be nn.Linear(embed_dim, embed_dim), {d}->{d} (step 1)",
        None if square else "projections",
    ):  # fmt: skip
        return None
    count = sum(p.numel() for p in block.parameters())
    extra = count - sum(p.numel() for n in names.values() for p in getattr(block, n).parameters())
    no_bias = [n for n, theirs in names.items() if getattr(block, theirs).bias is None]
    note = f" ({', '.join(no_bias)} without a bias: the same as the lesson's with it zero)" if no_bias else ""
    report.add(
        extra == 0,
        f"parameters: {count:,}" + (" = 4·d² + 4·d" if count == 4 * d * d + 4 * d else note)
        + (f"; {extra:,} beyond W_q W_k W_v W_o, which the lesson's block does not have" if extra else ""),
        "parameters" if extra else None,
    )  # fmt: skip
    return names


def check_behaviour(report: Report, block, weights: dict, n_heads: int) -> None:
    """Run it on one input, the mask passed each way a block may read it: its output's shape, whether it is causal
    and finite, and whether it equals the lesson's block -- else the usual mistake that reproduces it, named."""
    d_model = weights["W_q"][0].shape[0]
    x = torch.randn(B, T, d_model, generator=torch.Generator().manual_seed(1))
    expected = reference_output(x, weights, n_heads)
    later = x.clone()  # the same input with its last token changed: a causal block's earlier outputs stay
    later[:, -1] = torch.randn(B, d_model, generator=torch.Generator().manual_seed(2))
    runs, failures = {}, {}  # each way of passing the mask -> (out, weights returned, causal, finite)
    for style in MASK_STYLES:
        try:
            with torch.no_grad():
                out, returned = call_block(block, x, style)
                changed = call_block(block, later, style)[0]
        except Exception as e:  # noqa: BLE001
            failures[style] = e
            continue
        causal = out.shape == changed.shape and difference(changed[:, :-1], out[:, :-1]) <= TOLERANCE
        runs[style] = (out, returned, causal, bool(torch.isfinite(out).all()))
    if not runs:
        e = next(iter(failures.values()))
        contiguous = "view size is not compatible" in str(e)
        why = NOT_CONTIGUOUS if contiguous else f"forward raised {type(e).__name__}: {str(e).splitlines()[0]}"
        report.add(False, why, "contiguous" if contiguous else "forward")
        return
    # how the block reads the mask: the way that keeps it causal and finite, then closest to the lesson's
    order = list(MASK_STYLES)
    style = min(runs, key=lambda s: (not (runs[s][2] and runs[s][3]), difference(runs[s][0], expected), order.index(s)))
    out, returned, causal, finite = runs[style]
    report.mask = style
    shaped = tuple(out.shape) == (B, T, d_model)
    beside = f", the weights {tuple(returned.shape)} beside it" if returned is not None else ""
    if not report.add(
        shaped, f"output {tuple(out.shape)} from x {(B, T, d_model)}{beside}", None if shaped else "shape"
    ):
        return
    gap = difference(out, expected)
    named = None if gap <= TOLERANCE else usual_mistake(runs, x, weights, n_heads)
    if not (causal and finite) and named:  # the mistake is why a later token reaches back (or why NaN): say it
        report.add(False, *named)
        return
    report.add(
        causal and finite,
        f"mask: {MASK_STYLES[style]}; "
        + ("causal: a later token changes no earlier output" if causal else "a later token changes earlier outputs")
        + ("" if finite else "; the output has NaN"),
    )
    if gap <= TOLERANCE:
        report.add(True, f"equal to the lesson's block to {TOLERANCE:g} (largest difference {gap:.1e}), same weights")
        return
    if named is None:
        named = (
            f"differs from the lesson's block by up to {gap:.2g} with the same weights, and no single usual mistake "
            "explains it: python -m model.walkthrough prints each step to compare with yours",
            "unknown",
        )
    report.add(False, *named)


def usual_mistake(runs: dict, x, weights: dict, n_heads: int) -> tuple[str, str] | None:
    """(line, name) of the first of MISTAKES whose block computes what the learner's does, however it was handed
    the mask; None when none of them does."""
    d_model = x.shape[-1]
    sizes = {"sqrt_hd": math.sqrt(d_model // n_heads), "sqrt_d": math.sqrt(d_model)}
    for name, (changes, line) in MISTAKES.items():
        args = {k: (math.sqrt(d_model) if v == "d_model" else v) for k, v in changes.items()}
        wrong = lesson(x, weights, n_heads, **args)
        if any(difference(run[0], wrong) <= TOLERANCE for run in runs.values()):
            return line.format(**sizes), name
    return None


def render(report: Report) -> str:
    lines = [f"checking {report.spec} against the lesson's block (model/attention.py)"]
    lines += [f"  {'ok  ' if f.ok else 'FAIL'} {f.line}" for f in report.findings]
    if report.ok and ":" in report.spec:  # a file's class: the line that trains with it
        lines.append(f"your block is the lesson's: python train.py model.attention={report.spec}")
    elif report.ok:
        lines.append("your block is the lesson's")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m model.check FILE.py:CLASS   (e.g. mine.py:MultiHeadAttention)", file=sys.stderr)
        return 2
    report = check_block(argv[0])
    print(render(report))
    return 0 if report.ok else (2 if report.mistakes == ["load"] else 1)


if __name__ == "__main__":
    sys.exit(main())
