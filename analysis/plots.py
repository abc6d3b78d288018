"""Figures (matplotlib, no display needed): attention grids, the ablation heatmap, the pruning curve.

Every function only draws and returns its Figure; the caller decides where it goes (analysis/record.py).
"""

from __future__ import annotations

import matplotlib
import matplotlib.patches
import numpy as np
from matplotlib.figure import Figure  # drawn straight to files: no pyplot, no display needed
from matplotlib.lines import Line2D

from analysis.metric import points
from data.problems import MASTERED
from model.hooks import head_label

ATTENTION_COLOURS = matplotlib.colormaps["viridis"].with_extremes(bad="white")  # gaps between blocks: white


def mosaic(blocks, gap: int = 1):
    """(R, C, T, T) attention blocks -> one (R*(T+gap)-gap, C*(T+gap)-gap) image, NaN in the gaps."""
    R, C, T, _ = blocks.shape
    canvas = np.full((R * (T + gap) - gap, C * (T + gap) - gap), np.nan)
    for r in range(R):
        for c in range(C):
            canvas[r * (T + gap) : r * (T + gap) + T, c * (T + gap) : c * (T + gap) + T] = blocks[r, c]
    return canvas


MASKED_COLOUR = (0.82, 0.82, 0.82, 1.0)  # future keys a causal head cannot see: grey, not the colour of weight 0
CELL = 0.25  # inches per attention cell: 22 px at the recorded 90 dpi, room for a 9-pt label under each


def attention_grid(
    weights, row_labels: list[list[str]], key_labels: list[str], layer: int, title: str, probes: list[str] | None = None
) -> Figure:
    """One layer as one mosaic: a block row per probe problem (named at its left), a block column per head.

    Inside a block, queries are rows and keys are columns; the keys a causal head cannot see (the future) are
    grey, apart from the darkest colour, which is weight 0. Every block shares one colour scale. Rows are labelled
    with the probe's tokens, columns with what each position is (a2, '=', r0, ...), the same for every probe.
    Labels are at least 9 pt (11 px at the recorded 90 dpi). weights: (n_probes, n_heads, T, T) for this layer.
    """
    n_probes, n_heads, T, _ = weights.shape
    gap = 1
    canvas = mosaic(weights, gap)
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    masked = mosaic(np.broadcast_to(future, (n_probes, n_heads, T, T)).astype(float), gap) == 1
    canvas[masked] = np.nan  # drawn below as grey, not as a weight
    overlay = np.zeros((*canvas.shape, 4))
    overlay[masked] = MASKED_COLOUR
    left, right, top, bottom = 1.4, 1.5, 0.95, 0.95  # inches, fixed: no layout engine
    width, height = CELL * canvas.shape[1], CELL * canvas.shape[0]
    fig = Figure(figsize=(left + width + right, top + height + bottom))
    W, H = fig.get_size_inches()
    ax = fig.add_axes((left / W, bottom / H, width / W, height / H))
    image = ax.imshow(canvas, vmin=0.0, vmax=1.0, cmap=ATTENTION_COLOURS, interpolation="nearest", aspect="auto")
    ax.imshow(overlay, interpolation="nearest", aspect="auto")
    # Token labels as plain text, not ticks: a hundred Tick objects cost more than the whole image.
    ax.set_xticks([])
    ax.set_yticks([])
    for p, labels in enumerate(row_labels):
        for t, text in enumerate(labels):
            ax.text(-0.7, p * (T + gap) + t, text, ha="right", va="center", fontsize=9)
        if probes is not None:
            ax.text(
                -2.6,
                p * (T + gap) + (T - 1) / 2,
                f"probe {probes[p]}",
                ha="right",
                va="center",
                fontsize=10,
                rotation=90,
                fontweight="bold",
            )
    for h in range(n_heads):
        for t, text in enumerate(key_labels):
            ax.text(h * (T + gap) + t, canvas.shape[0] - 0.3, text, ha="center", va="top", fontsize=9, rotation=90)
        ax.text(h * (T + gap) + (T - 1) / 2, -0.9, f"head {h}", ha="center", va="bottom", fontsize=10)
    for side in ax.spines.values():
        side.set_visible(False)
    fig.text(
        0.25 / W,
        (bottom + height / 2) / H,
        "query (the problem's tokens)",
        rotation=90,
        ha="left",
        va="center",
        fontsize=10,
    )
    fig.text(
        (left + width / 2) / W,
        0.12 / H,
        "key (a2 = a's hundreds digit, op = the operator, r0 = the result's units, ^ = [BOS])",
        ha="center",
        va="bottom",
        fontsize=10,
    )
    bar = fig.colorbar(
        image, cax=fig.add_axes(((left + width + 0.25) / W, (bottom + height * 0.3) / H, 0.18 / W, height * 0.7 / H))
    )
    bar.set_label("attention weight", fontsize=10)
    bar.ax.tick_params(labelsize=9)
    fig.patches.append(
        matplotlib.patches.Rectangle(
            ((left + width + 0.25) / W, (bottom + height * 0.12) / H),
            0.18 / W,
            0.18 / H,
            transform=fig.transFigure,
            facecolor=MASKED_COLOUR,
            edgecolor="none",
        )
    )
    fig.text((left + width + 0.5) / W, (bottom + height * 0.12 + 0.09) / H, "masked\n(future)", va="center", fontsize=9)
    named = f" — probes {', '.join(probes)}" if probes else ""
    fig.suptitle(f"layer {layer} attention, {title}{named}", fontsize=11, y=1 - 0.1 / H, va="top")
    return fig


def map_figures(maps: dict, tag: str) -> list[Figure]:
    """One attention grid per layer from ``analysis.maps.attention_maps``'s data."""
    return [
        attention_grid(np.array(layer), maps["tokens"], maps["key_labels"], i, tag, maps.get("probes"))
        for i, layer in enumerate(maps["weights"])
    ]


def head_heatmaps(
    grids: dict[str, np.ndarray],
    title: str,
    label: str,
    limits: tuple[float, float] | None = None,
    cmap: str = "RdBu_r",
    number: str = "+.1f",
    per_row: int = 3,
) -> Figure:
    """One layer x head heatmap per entry of ``grids`` ({panel title: (n_layers, n_heads) values}), ``per_row`` to a
    row, on one colour scale, each cell written out (``number``: its format). limits: the scale's (low, high); None
    = symmetric around 0."""
    n_layers, n_heads = next(iter(grids.values())).shape
    if limits is None:
        most = max(float(np.abs(g).max()) for g in grids.values()) or 1.0
        limits = (-most, most)
    columns = min(per_row, len(grids))
    rows = -(-len(grids) // columns)
    height = (0.9 * n_layers + 0.9) * rows + 0.6
    fig = Figure(figsize=(1.1 * n_heads * columns + 2, height))  # no layout engine: it would double the drawing time
    fig.subplots_adjust(left=0.05, right=0.98, top=1 - 0.55 / height, bottom=0.45 / height, wspace=0.25, hspace=0.5)
    axes = fig.subplots(rows, columns, squeeze=False).flatten()
    for ax in axes[len(grids) :]:
        ax.set_visible(False)
    for ax, (name, grid) in zip(axes, grids.items(), strict=False):
        image = ax.imshow(grid, cmap=cmap, vmin=limits[0], vmax=limits[1])
        for layer in range(n_layers):
            for head in range(n_heads):
                red, green, blue, _ = image.cmap(image.norm(grid[layer, head]))
                dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5  # white text on a dark cell
                text = format(grid[layer, head], number)
                ax.text(head, layer, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        ax.set_xticks(range(n_heads), [f"h{h}" for h in range(n_heads)], fontsize=8)
        ax.set_yticks(range(n_layers), [f"L{layer}" for layer in range(n_layers)], fontsize=8)
        ax.set_title(name, fontsize=9)
    fig.colorbar(image, ax=axes[: len(grids)].tolist(), shrink=0.8, label=label)
    fig.suptitle(title, fontsize=10)
    return fig


def head_grids(rows, value: str, variant: str | None, n_layers: int, n_heads: int, scale: float = 1.0) -> dict:
    """Rows with layer, head (and a variant) -> {variant: (n_layers, n_heads) grid of ``value`` x scale}."""
    grids: dict = {}
    for r in rows:
        key = getattr(r, variant) if variant else ""
        grids.setdefault(key, np.zeros((n_layers, n_heads)))[r.layer, r.head] = scale * getattr(r, value)
    return grids


def ablation_heatmap(rows: list, n_layers: int, n_heads: int) -> Figure:
    """Layer x head grid of the exact-match change when each head is ablated, zero and mean side by side
    (rows: analysis/metrics/ablation.py's AblationRow)."""
    grids = head_grids(rows, "delta_exact_match", "ablation", n_layers, n_heads, scale=100)
    return head_heatmaps(
        {f"{kind}-ablation": grid for kind, grid in grids.items()},
        "what each head is worth: test exact-match change when it is ablated",
        "Δ exact-match (points)",
        limits=(-100, 0),
        cmap="Reds_r",
    )


PRUNING_ORDERS = {
    "ranked": "heads removed least important first (ranked by their own ablation)",
    "greedy": "heads removed greedily (the least harmful one at each step)",
}


def pruning_curve(curve: list, prunable: float, tolerance: float, order: str = "ranked") -> Figure:
    """Exact-match against the fraction of heads removed, in the order the pruning took them (curve:
    analysis/metrics/pruning.py's PruningStep)."""
    fig = Figure(figsize=(8, 4.8))  # 720 x 432 px at 90 dpi; fixed margins (a layout engine doubles drawing time)
    fig.subplots_adjust(left=0.08, right=0.98, top=0.92, bottom=0.11)
    ax = fig.subplots()
    xs = [s.fraction for s in curve]
    ys = [100 * s.exact_match for s in curve]
    ax.plot(xs, ys, marker="o")
    for s, x, y in zip(curve[1:], xs[1:], ys[1:], strict=True):
        ax.annotate(
            head_label(*s.removed[-1]),
            (x, y),
            textcoords="offset points",
            xytext=(0, 6),
            fontsize=7,
            ha="center",
            rotation=60 if len(curve) > 12 else 0,
        )
    margin = f"intact − {points(tolerance)}"
    ax.axhline(ys[0] - 100 * tolerance, color="grey", linestyle="--", linewidth=0.8, label=margin)
    ax.axvline(prunable, color="tab:green", linestyle=":", label=f"prunable fraction {prunable:.0%}")
    ax.set_xlabel("fraction of heads removed")
    ax.set_ylabel("test exact-match (%)")
    ax.set_ylim(-2, 112)  # room above 100% for the head labels, below the title
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title(f"head pruning: {PRUNING_ORDERS[order]}", fontsize=10)
    return fig


def learning_curves(ax, curves: list[tuple[str, list[dict]]], title: str) -> None:
    """Val exact-match (%) against training step on ``ax``, one line per (label, history)."""
    for label, history in curves:
        if history:
            ax.plot([h["step"] for h in history], [100 * h["exact_match"] for h in history], marker=".", label=label)
    ax.axhline(100 * MASTERED, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("val exact-match (%)")
    ax.set_ylim(-2, 102)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    ax.set_title(title, fontsize=10)


def sweep_figure(rows: list[dict]) -> Figure:
    """Left: val exact-match against training step, one line per run. Right: each run's final test
    exact-match (failed runs marked)."""
    fig = Figure(figsize=(11, 4))
    curves, finals = fig.subplots(1, 2, width_ratios=[3, 2])
    learning_curves(curves, [(row["run"], row["history"]) for row in rows], "learning curves")
    labels = [row["run"] for row in rows]
    values = [100 * (row["test_exact_match"] or 0) for row in rows]
    bars = finals.barh(range(len(rows)), values, color=["tab:blue" if r["status"] == "ok" else "tab:red" for r in rows])
    for bar, row in zip(bars, rows, strict=True):
        text = f"{100 * row['test_exact_match']:.2f}%" if row["status"] == "ok" else "failed"
        inside = row["status"] == "ok" and bar.get_width() > 30  # a short bar gets its label just past its end
        finals.text(
            bar.get_width() - 1 if inside else bar.get_width() + 1,
            bar.get_y() + bar.get_height() / 2,
            text,
            va="center",
            ha="right" if inside else "left",
            fontsize=9,
            color="white" if inside else "black",
        )
    finals.set_yticks(range(len(rows)), labels, fontsize=9)
    finals.invert_yaxis()
    finals.set_xlim(0, 100)
    finals.set_xlabel("test exact-match (%)")
    finals.set_title("final accuracy", fontsize=10)
    fig.tight_layout()
    return fig


def head_count_comparison(runs: list[dict]) -> Figure:
    """Side by side: each run's learning curve, and its final attention (layers x heads) on one probe.

    runs: dicts with "label", "history" (val entries) and "weights" ((n_layers, n_heads, T, T) array).
    """
    fig = Figure(figsize=(12, 2.8 * len(runs) + 0.6))
    grid = fig.add_gridspec(len(runs), 2, width_ratios=[2, 3])
    learning_curves(fig.add_subplot(grid[:, 0]), [(run["label"], run["history"]) for run in runs], "who learns faster")
    for i, run in enumerate(runs):
        ax = fig.add_subplot(grid[i, 1])
        ax.imshow(mosaic(run["weights"]), vmin=0.0, vmax=1.0, cmap=ATTENTION_COLOURS, interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"{run['label']}: final attention on {run['probe']} (rows: layers, columns: heads)", fontsize=9)
    fig.tight_layout()
    return fig


INPUT_COLOURS = {"q": "#3b6fb6", "k": "#2e9e5b", "v": "#e08a1e", "in": "#55606e"}  # a circuit edge, by what it feeds


def circuit_graphs(rows, nodes: list[dict], circuits: dict[str, dict], per_row: int = 4) -> Figure:
    """One panel per studied digit: components where ``nodes`` places them, the circuit's edges as lines (width: the
    share of the logit difference the edge alone carries; colour: the receiver's input, q / k / v / in).
    rows: analysis.metrics.circuit.EdgeRow; circuits: per digit, its size and faithfulness."""
    digits = list(circuits)
    n_rows, n_cols = -(-len(digits) // per_row), min(per_row, len(digits))
    width, height = max(n["x"] for n in nodes) + 1, max(n["y"] for n in nodes)
    fig = Figure(figsize=(n_cols * (1.1 * width + 0.6), n_rows * (0.55 * height + 1.6)))
    at = {n["name"]: (n["x"], n["y"]) for n in nodes}
    offset = {"q": -0.18, "k": 0.0, "v": 0.18, "in": 0.0}  # where on its receiver an edge lands
    for i, digit in enumerate(digits):
        ax = fig.add_subplot(n_rows, n_cols, i + 1)
        edges = [r for r in rows if r.digit == digit and r.in_circuit]
        strongest = max((abs(r.lost) for r in edges), default=1.0) or 1.0
        used = {r.sender for r in edges} | {r.receiver for r in edges}
        for r in sorted(edges, key=lambda r: abs(r.lost)):
            (x0, y0), (x1, y1) = at[r.sender], at[r.receiver]
            ax.plot(
                [x0, x1 + offset[r.input]],
                [y0 + 0.12, y1 - 0.12],
                color=INPUT_COLOURS[r.input],
                linewidth=0.8 + 5 * abs(r.lost) / strongest,
                alpha=0.8,
                solid_capstyle="round",
                zorder=1,
            )
        for name, (x, y) in at.items():
            on = name in used
            ax.scatter(
                [x],
                [y],
                s=520,
                color="#f3d9a4" if on else "#eceff3",
                edgecolor="#1d2330" if on else "#b8bec8",
                zorder=2,
            )
            ax.text(x, y, name, ha="center", va="center", fontsize=8, color="#1d2330" if on else "#8a93a0", zorder=3)
        c = circuits[digit]
        ax.set_title(
            f"{digit}: {c['edges']} of {c['edges'] / c['fraction']:.0f} edges, {c['faithfulness']:.0%} recovered\n"
            f"random sets as large: {c['random_mean']:.0%} ± {c['random_std']:.0%}",
            fontsize=9,
        )
        ax.set_xlim(-0.7, width - 0.3)
        ax.set_ylim(-0.6, height + 0.6)
        ax.axis("off")
    handles = [Line2D([], [], color=c, linewidth=3, label=k) for k, c in INPUT_COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=9, frameon=False, title="edge into the receiver's")
    fig.suptitle("circuits: the edges that carry each digit (line width = share of the logit difference)", fontsize=10)
    fig.subplots_adjust(
        left=0.02,
        right=0.98,
        top=0.86 if n_rows == 1 else 0.92,
        bottom=0.14 if n_rows == 1 else 0.07,
        hspace=0.35,
        wspace=0.08,
    )
    return fig
