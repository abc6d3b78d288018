"""Worked example: where does the calculator carry? Activation patching in TransformerLens.

    python docs/patching.py [--ckpt runs/<run>] [--place 1] [--n 500] [--out FILE] [--json FILE]

The figure goes to the run's directory (``runs/<run>/lens_patching.png``, beside the run's own ``patching.png``)
unless ``--out`` says otherwise;
``--json`` also writes the numbers it prints.

(``pip install -e ".[interop]"`` first.) Our built-in analysis switches heads off and watches accuracy
fall; that says a head matters, not what for. Activation patching asks a sharper question: take two
problems that differ only in whether a carry reaches answer digit ``r_k``,

    clean      ...7+...8=5   units 7+8 = 15: carry 1 into the tens
    corrupted  ...2+...3=5   units 2+3 =  5: no carry (same units answer digit 5)

run the model on the corrupted one and copy in ONE activation from the clean run -- the residual
stream at one layer and position, one head's output at one position, or one MLP's output. If the
tens digit flips to the clean answer, that activation carries the carry. The score is the usual
normalised logit difference, per patch:

    restored = (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted),   LD = logit[clean r_k] - logit[corrupted r_k]

averaged over many pairs: 1 = the patch alone restores the clean answer, 0 = it changes nothing.
The pairs differ in two prompt tokens only (the operands' digits at place k-1); everything the model
writes before r_k, teacher-forced, is the same in both. The patching itself is TransformerLens'
``transformer_lens.patching`` (``get_act_patch_resid_pre``, ``get_act_patch_attn_head_out_by_pos``,
``get_act_patch_mlp_out``) on the model that ``model.lens.transformer_lens_model`` loads.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from data.problems import ProblemFormat  # noqa: E402
from data.text import answer_text, prompt_text  # noqa: E402


@dataclass
class CarryPairs:
    """Clean and corrupted strings (prompt + the answer digits before r_k), and what r_k should be."""

    place: int  # k: the answer digit whose incoming carry is flipped
    clean: list[str]
    corrupted: list[str]
    clean_digit: list[str]  # r_k of the clean problem
    corrupted_digit: list[str]


def carry_pairs(fmt: ProblemFormat, place: int, n: int, seed: int = 0) -> CarryPairs:
    """n pairs of additions that differ only in the digits at place k-1: clean sum there s >= 10, corrupted
    s - 10, so the carry into place k flips from 1 to 0 while every lower answer digit stays the same."""
    if "+" not in fmt.operators or not fmt.reverse_answer or fmt.work_len:
        raise ValueError(
            "this example patches carries of '+' with answers written least significant digit first and no "
            f"working (the default); this model does {fmt.operators!r} with reverse_answer={fmt.reverse_answer}, "
            f"show_work={fmt.show_work}"
        )
    if not 1 <= place <= fmt.digits:
        raise ValueError(f"--place {place}: choose an answer digit that can receive a carry, 1..{fmt.digits}")
    g = torch.Generator().manual_seed(seed)
    high, unit = 10**fmt.digits, 10 ** (place - 1)
    a, b = torch.randint(high, (n,), generator=g), torch.randint(high, (n,), generator=g)
    s_clean = torch.randint(10, 19, (n,), generator=g)  # digit sum at place k-1: 10..18
    x_clean = s_clean - 9 + (torch.rand(n, generator=g) * (19 - s_clean)).long()  # a's digit: max(0,s-9)..9
    s_bad = s_clean - 10  # 0..8
    x_bad = (torch.rand(n, generator=g) * (s_bad + 1)).long()  # 0..s_bad
    pairs = CarryPairs(place, [], [], [], [])
    for i in range(n):
        keep_a, keep_b = int(a[i]) - (int(a[i]) // unit % 10) * unit, int(b[i]) - (int(b[i]) // unit % 10) * unit
        clean = (keep_a + int(x_clean[i]) * unit, keep_b + int(s_clean[i] - x_clean[i]) * unit)
        bad = (keep_a + int(x_bad[i]) * unit, keep_b + int(s_bad[i] - x_bad[i]) * unit)
        texts = []
        for x, y in (clean, bad):
            answer = answer_text(fmt, x + y)  # reversed: r_0 r_1 ...
            texts.append((prompt_text(fmt, x, "+", y) + answer[:place], answer[place]))
        (clean_text, clean_digit), (bad_text, bad_digit) = texts
        assert clean_text[-place:] == bad_text[-place:] and clean_digit != bad_digit  # same prefix, r_k differs
        pairs.clean.append(clean_text)
        pairs.corrupted.append(bad_text)
        pairs.clean_digit.append(clean_digit)
        pairs.corrupted_digit.append(bad_digit)
    return pairs


def position_labels(fmt: ProblemFormat, place: int) -> list[str]:
    """One label per position: ^ a2 a1 a0 + b2 b1 b0 = r0 ... (the last position predicts r_place)."""
    a = [f"a{i}" for i in reversed(range(fmt.digits))]
    return ["^", *a, "+", *[x.replace("a", "b") for x in a], "=", *[f"r{i}" for i in range(place)]]


@torch.inference_mode()
def patch_carry(model, pairs: CarryPairs) -> dict:
    """Patch the clean run into the corrupted one at every layer x position (residual stream, MLP output) and
    layer x head x position (head output, hook_z); return each patch's mean normalised logit difference."""
    from transformer_lens import patching

    clean_tokens = model.to_tokens(pairs.clean)  # (N, T): [BOS] prompt r_0..r_{k-1}
    corrupted_tokens = model.to_tokens(pairs.corrupted)
    clean_ids = model.to_tokens(pairs.clean_digit, prepend_bos=False)[:, 0]  # (N,) token id of r_k
    corrupted_ids = model.to_tokens(pairs.corrupted_digit, prepend_bos=False)[:, 0]
    rows = torch.arange(len(clean_ids))

    def logit_diff(logits: torch.Tensor) -> torch.Tensor:
        """(N, T, vocab) -> (N,): how much the last position prefers the clean r_k over the corrupted one."""
        last = logits[:, -1]
        return last[rows, clean_ids] - last[rows, corrupted_ids]

    clean_logits, clean_cache = model.run_with_cache(clean_tokens)
    clean_ld, corrupted_ld = logit_diff(clean_logits).mean(), logit_diff(model(corrupted_tokens)).mean()
    metric = lambda logits: (logit_diff(logits) - corrupted_ld) / (clean_ld - corrupted_ld)  # noqa: E731
    args = (model, corrupted_tokens, clean_cache, metric)
    result = {
        "resid_pre": patching.get_act_patch_resid_pre(*args, reduce="mean"),  # (n_layers, T)
        "head_out": patching.get_act_patch_attn_head_out_by_pos(*args, reduce="mean"),  # (n_layers, T, n_heads)
        "mlp_out": patching.get_act_patch_mlp_out(*args, reduce="mean"),  # (n_layers, T)
        "clean_ld": float(clean_ld),
        "corrupted_ld": float(corrupted_ld),
        "clean_right": float((clean_logits[:, -1].argmax(-1) == clean_ids).float().mean()),
    }
    # where the head that restores most at the last position looks from there, in the clean run
    layer, head = divmod(int(result["head_out"][:, -1].argmax()), model.cfg.n_heads)
    pattern = clean_cache[f"blocks.{layer}.attn.hook_pattern"][:, head, -1]  # (N, T): last query -> every key
    result |= {"top_head": (layer, head), "top_head_attention": pattern.mean(0)}
    return result


def plot(result: dict, labels: list[str], title: str, out: Path) -> None:
    """Three heatmaps (residual stream, head outputs, MLP outputs: patch site x position) and the attention
    of the head that restores most."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heads = result["head_out"]  # (n_layers, T, n_heads)
    n_layers, _, n_heads = heads.shape
    panels = [
        ("residual stream into block L", result["resid_pre"], [f"L{i}" for i in range(n_layers)]),
        (
            "one head's output (hook_z)",
            heads.permute(0, 2, 1).reshape(n_layers * n_heads, -1),
            [f"L{i}h{h}" for i in range(n_layers) for h in range(n_heads)],
        ),
        ("MLP output", result["mlp_out"], [f"L{i}" for i in range(n_layers)]),
    ]
    fig, axes = plt.subplots(
        1,
        4,
        figsize=(16, 0.35 * n_layers * n_heads + 2.6),
        layout="constrained",
        gridspec_kw={"width_ratios": [1, 1, 1, 0.8]},
    )
    for ax, (name, values, rows) in zip(axes, panels, strict=False):
        image = ax.imshow(values.numpy(), cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
        ax.set_title(f"patched: {name}", fontsize=10)
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        ax.set_xlabel("position (its token)", fontsize=8)
        for r in range(values.shape[0]):
            for c in range(values.shape[1]):
                if abs(v := float(values[r, c])) >= 0.1:
                    ax.text(
                        c,
                        r,
                        f"{v:.2f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if abs(v) > 0.6 else "black",
                    )
    bar = fig.colorbar(image, ax=axes[:3], shrink=0.9, pad=0.01, location="right", aspect=30)
    bar.set_label("share of the carry's effect restored", fontsize=9)
    layer, head = result["top_head"]
    ax = axes[3]
    ax.bar(range(len(labels)), result["top_head_attention"].numpy(), color="tab:blue")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_title(f"L{layer}h{head}'s attention from {labels[-1]} (clean, mean)", fontsize=10)
    ax.set_xlabel("key position", fontsize=8)
    fig.suptitle(title, fontsize=10)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def strongest(result: dict, labels: list[str], k: int = 5) -> list[str]:
    """The k patches that restore most, as 'head L0h3 at a0: 0.84'."""
    found = []
    for name, values in (("resid_pre", result["resid_pre"]), ("mlp_out", result["mlp_out"])):
        found += [
            (float(values[L, p]), f"{name} L{L} at {labels[p]}")
            for L in range(values.shape[0])
            for p in range(values.shape[1])
        ]
    heads = result["head_out"]
    found += [
        (float(heads[L, p, h]), f"head L{L}h{h} at {labels[p]}")
        for L in range(heads.shape[0])
        for p in range(heads.shape[1])
        for h in range(heads.shape[2])
    ]
    return [f"{what}: {v:.2f}" for v, what in sorted(found, reverse=True)[:k]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python docs/patching.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", help="checkpoint file or run directory (default: the newest run's)")
    parser.add_argument("--place", type=int, default=1, help="answer digit r_k whose incoming carry is patched")
    parser.add_argument("--n", type=int, default=500, help="clean/corrupted pairs (default 500)")
    parser.add_argument("--out", type=Path, help="the figure (default: lens_patching.png in the model's run directory)")
    parser.add_argument("--json", type=Path, help="also write the numbers printed here to this file")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")

    from model.checkpoint import CheckpointError, load_calculator, newest_checkpoint
    from model.lens import transformer_lens_model
    from model.optional import MissingExtraError

    try:
        calc = load_calculator(args.ckpt or newest_checkpoint(ROOT))
        pairs = carry_pairs(calc.fmt, args.place, args.n)
        model = transformer_lens_model(calc)
    except (CheckpointError, MissingExtraError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    result = patch_carry(model, pairs)
    if args.out is None:
        from storage.rundir import RunDir

        run = RunDir.of_checkpoint(Path(calc.path))
        args.out = (run.path if run is not None else Path(calc.path).parent) / "lens_patching.png"
    labels = position_labels(calc.fmt, args.place)
    title = (
        f"{calc.describe()}: which activation carries the carry into answer digit r{args.place}?\n"
        f"{args.n} pairs clean (carry) / corrupted (no carry), run corrupted with one clean activation; "
        f"the last position ({labels[-1]}) predicts r{args.place}"
    )
    plot(result, labels, title, args.out)
    print(f"{calc.describe()} ({calc.path}); {args.n} pairs, carry into r{args.place}")
    print(
        f"logit diff clean r{args.place} - corrupted r{args.place}: clean run {result['clean_ld']:.2f}, "
        f"corrupted run {result['corrupted_ld']:.2f}; clean answer digit right {result['clean_right']:.1%}"
    )
    print("restores most: " + "; ".join(strongest(result, labels)))
    layer, head = result["top_head"]
    attention = ", ".join(
        f"{labels[p]} {w:.2f}" for p, w in enumerate(result["top_head_attention"].tolist()) if w >= 0.05
    )
    print(f"L{layer}h{head} at {labels[-1]} attends to: {attention}")
    print(f"figure: {args.out}")
    if args.json is not None:
        top = float(result["head_out"][layer, -1, head])
        reads = [labels[p] for p, w in enumerate(result["top_head_attention"].tolist()) if w >= 0.2]
        facts = {
            "model": calc.describe(),
            "place": args.place,
            "pairs": args.n,
            "clean_right": round(float(result["clean_right"]), 4),
            "top_head": f"L{layer}h{head}",
            "top_head_restores": round(top, 4),
            "top_head_reads": reads,
            "strongest": strongest(result, labels),
        }
        args.json.write_text(json.dumps(facts, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
