"""The length figure: exact-match against operand length, the trained lengths shaded (a run's length.png, a
sweep's sweep_length.png, docs/images/length.png)."""

from __future__ import annotations

from matplotlib.figure import Figure


def length_curves(curves: dict[str, dict[int, float]], trained: int) -> Figure:
    """Exact-match against operand length, one curve per label ({label: {digits: exact-match}}), the trained
    lengths shaded; on a log axis where a curve goes past 100 digits."""
    beside = len(curves) > 3  # many curves: the legend beside the axes, where it covers none of them
    fig = Figure(figsize=(11.5 if beside else 8, 4.8))  # 1035 (720) x 432 px at 90 dpi
    fig.subplots_adjust(left=0.065 if beside else 0.09, right=0.64 if beside else 0.98, top=0.92, bottom=0.12)
    ax = fig.subplots()
    longest = max(max(c) for c in curves.values())
    log = longest > 100  # lengths to 1,000 digits: a log axis, each tenfold the same width
    ax.axvspan(0.5, trained + 0.5, color="0.9", zorder=0)
    middle = (trained + 0.5) ** 0.5 * 0.5**0.5 if log else trained / 2 + 0.5
    ax.text(middle, 50, f"trained:\n1-{trained} digits", ha="center", va="center", fontsize=10, color="0.35")
    for label, curve in curves.items():
        widths = sorted(curve)
        ax.plot(widths, [100 * curve[w] for w in widths], marker="o", markersize=3, label=label)
    ax.axhline(99, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("digits of each operand", fontsize=10)
    ax.set_ylabel("exact-match (%)", fontsize=10)
    ax.set_ylim(-2, 104)
    if log:
        ax.set_xscale("log")
        ax.set_xlim(0.5, longest * 1.3)
    else:
        ax.set_xlim(0.5, longest + 0.5)
    ax.tick_params(labelsize=10)
    if beside:
        ax.legend(fontsize=10, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    else:
        ax.legend(fontsize=10, loc="lower left")
    ax.set_title("beyond the trained length", fontsize=11)
    return fig
