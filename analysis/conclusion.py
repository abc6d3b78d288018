"""What a sweep's own numbers say, in a few sentences: the closing words of sweep_summary.md and sweep_report.html.

``conclude(rows)`` reads the summary rows (analysis/sweep.py's ``summarise``) and says, per setting (a run's
overrides but its seed; "1 head", "2 heads", ... when the sweep varies only the head count): the steps to the
milestone with their range over seeds, what the settings cost per step and what they buy (steps, prunable heads)
against the first one seed by seed, and where the seeds disagree. Only what was measured, no stronger: a tie is a
tie, one seed has no spread, a range that overlaps another separates nothing.
"""

from __future__ import annotations

import statistics
from itertools import pairwise

from data.problems import MASTERED
from storage.messages import counted


def setting_of(row: dict) -> str:
    """A run's setting: its overrides but the seed (analysis.sweep.grouped_over_seeds groups by it too)."""
    return " ".join(o for o in row["run"].split() if not o.startswith("seed=")) or "(defaults)"


def _groups(rows: list[dict]) -> tuple[list[str], dict[str, list[dict]], dict[str, str]]:
    """The settings in order (by head count when the sweep varies it), their finished runs, and their names."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        if row["status"] == "ok":
            groups.setdefault(setting_of(row), []).append(row)
    heads = {s: {r["n_heads"] for r in g} for s, g in groups.items()}
    by_heads = all(len(h) == 1 and isinstance(next(iter(h)), int) for h in heads.values()) and len(
        {min(h) for h in heads.values()}
    ) == len(groups)
    if by_heads:
        order = sorted(groups, key=lambda s: min(heads[s]))
        names = {s: f"{min(heads[s])} head{'s' if min(heads[s]) != 1 else ''}" for s in order}
    else:
        order, names = list(groups), {s: s for s in groups}
    return order, groups, names


def _num(value) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def _spread(values: list) -> str:
    """'300..400 (median 325)', or the one value."""
    if len(values) == 1:
        return _num(values[0])
    lo, hi = min(values), max(values)
    return _num(lo) if lo == hi else f"{_num(lo)}..{_num(hi)} (median {_num(statistics.median(values))})"


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _steps_trained(row: dict) -> int | None:
    return row["history"][-1]["step"] if row.get("history") else None


def _per_step_ms(row: dict) -> float | None:
    steps = _steps_trained(row)
    return 1000 * row["train_seconds"] / steps if steps and isinstance(row.get("train_seconds"), (int, float)) else None


def _by_seed(group: list[dict]) -> dict:
    return {r["seed"]: r for r in group}


def _against(base: list[dict], other: list[dict], key: str, lower_is_better: bool) -> dict[str, list]:
    """Seed by seed (the seeds both ran and both measured): the seeds on which ``other`` did better, the same,
    worse than ``base``."""
    b, o = _by_seed(base), _by_seed(other)
    out: dict[str, list] = {"better": [], "same": [], "worse": []}
    for seed in sorted(set(b) & set(o), key=str):
        x, y = b[seed][key], o[seed][key]
        if x is not None and y is not None:
            out["same" if y == x else "better" if (y < x) == lower_is_better else "worse"].append(seed)
    return out


def _seeds(seeds: list) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else "seeds " + ", ".join(str(s) for s in seeds)


def _count(found: dict[str, list], words: dict[str, str]) -> str:
    """'fewer on seeds 0, 1; more on seed 2'."""
    return "; ".join(f"{words[k]} on {_seeds(found[k])}" for k in ("better", "same", "worse") if found[k])


def conclude(rows: list[dict]) -> list[str]:
    """The sweep's conclusion from its rows alone: plain sentences, one per line (a list in either output)."""
    order, groups, names = _groups(rows)
    failed = [r for r in rows if r["status"] != "ok"]
    if not order:
        return [f"No run finished ({len(failed)} failed): nothing to conclude."]
    seeds = sorted({r["seed"] for g in groups.values() for r in g}, key=str)
    lines = [
        f"From {counted(sum(len(g) for g in groups.values()), 'finished run')}: {counted(len(order), 'setting')} x "
        f"{counted(len(seeds), 'seed')} ({', '.join(str(s) for s in seeds)})"
        + (f"; {counted(len(failed), 'run')} failed, left out." if failed else ".")
    ]
    if len(seeds) == 1:
        lines.append("One seed per setting: no spread, so nothing here tells a setting's effect from one seed's luck.")
    lines += _steps(order, groups, names)
    lines += _exact_match(order, groups, names)
    lines += _cost(order, groups, names)
    lines += _prunable(order, groups, names)
    compared, disagree = _against_first(order, groups, names)
    lines += compared
    if len(seeds) > 1:
        lines.append(
            "Where the seeds disagree: " + "; ".join(disagree) + "."
            if disagree
            else "The seeds agree on every comparison above (none went both ways)."
        )
        lines.append(
            f"These are {len(seeds)} seeds on one task: a trend over them, not a law; "
            "ranges that overlap do not separate the settings."
        )
    return lines


MILESTONE_TEXT = _pct(MASTERED).replace(".00%", "%")


def _steps(order: list[str], groups: dict, names: dict) -> list[str]:
    """Steps to the milestone per setting (range over seeds, the runs that never reached it), and the fewest."""
    parts, medians = [], {}
    for s in order:
        reached = [r["steps_to_99"] for r in groups[s] if r["steps_to_99"] is not None]
        never = len(groups[s]) - len(reached)
        parts.append(
            f"{names[s]} {_spread(reached) if reached else 'never'}"
            + (f" ({never} of {len(groups[s])} never)" if never and reached else "")
        )
        if reached and not never:
            medians[s] = statistics.median(reached)
    lines = [f"Steps to {MILESTONE_TEXT} val exact-match (range over seeds): " + "; ".join(parts) + "."]
    if len(medians) > 1:
        fewest = min(medians.values())
        best = [names[s] for s in order if medians.get(s) == fewest]
        tie = f", a tie of {len(best)}" if len(best) > 1 else ""
        lines.append(
            f"Fewest steps (median over seeds, runs that all reached it): {', '.join(best)} ({_num(fewest)}{tie})."
        )
    return lines


def _exact_match(order: list[str], groups: dict, names: dict) -> list[str]:
    """The best test exact-match and every run tied with it: a tie is never one winner."""
    finished = [r for s in order for r in groups[s] if r["test_exact_match"] is not None]
    if not finished:
        return []
    top = max(r["test_exact_match"] for r in finished)
    tied = [r for r in finished if r["test_exact_match"] == top]
    if len(tied) == len(finished):
        return [f"Test exact-match: every run {_pct(top)}, a tie; no setting is better on it."]
    tied_settings = [names[s] for s in order if any(r in tied for r in groups[s])]
    who = f"a tie of {len(tied)} runs ({', '.join(tied_settings)})" if len(tied) > 1 else tied[0]["run"]
    by_setting = "; ".join(f"{names[s]} {_spread_pct(groups[s])}" for s in order)
    return [f"Test exact-match: best {_pct(top)}, {who}; by setting: {by_setting}."]


def _cost(order: list[str], groups: dict, names: dict) -> list[str]:
    """What a setting costs: its parameters and its training time per step."""
    lines = []
    params = {s: sorted({r["n_params"] for r in groups[s] if r["n_params"] is not None}) for s in order}
    every = set().union(*params.values())
    if len(every) == 1 and len(order) > 1:
        lines.append(f"Every setting has the same parameter count ({_num(every.pop())}).")
    elif every:
        lines.append("Parameters: " + "; ".join(f"{names[s]} {_spread(params[s])}" for s in order if params[s]) + ".")
    per_step = {s: [round(v, 1) for v in map(_per_step_ms, groups[s]) if v is not None] for s in order}
    if all(per_step.values()):
        lines.append(
            "Training time per step in ms (train seconds / steps trained, as measured, whatever else this machine "
            "ran then): " + "; ".join(f"{names[s]} {_spread(per_step[s])}" for s in order) + "."
        )
    return lines


def _prunable(order: list[str], groups: dict, names: dict) -> list[str]:
    prunable = {s: [r["prunable_fraction"] for r in groups[s] if r["prunable_fraction"] is not None] for s in order}
    if not any(prunable.values()):
        return []
    return [
        "Prunable fraction (the share of the model's heads that can be switched off together losing no more test "
        "exact-match than the analysis' tolerance; not claimed for a run that did not learn): "
        + "; ".join(f"{names[s]} {_spread(prunable[s]) if prunable[s] else 'not measured'}" for s in order)
        + "."
    ]


def _against_first(order: list[str], groups: dict, names: dict) -> tuple[list[str], list[str]]:
    """Every other setting against the first, seed by seed (steps to the milestone, prunable fraction); and where
    the seeds disagree: a setting that reached the milestone on some seeds only, a comparison that went both ways
    (against the first setting, or between neighbours)."""
    lines, disagree = [], []
    for s in order:
        never = [r["seed"] for r in groups[s] if r["steps_to_99"] is None]
        if never and len(never) < len(groups[s]):
            reached = [r["seed"] for r in groups[s] if r["steps_to_99"] is not None]
            disagree.append(f"{names[s]} reached {MILESTONE_TEXT} on {_seeds(reached)} but never on {_seeds(never)}")
    steps = {"better": "fewer steps", "same": "the same steps", "worse": "more steps"}
    prunable = {
        "better": "a higher prunable fraction",
        "same": "the same prunable fraction",
        "worse": "a lower prunable fraction",
    }
    for s in order[1:]:
        said = []
        for key, lower, words in (("steps_to_99", True, steps), ("prunable_fraction", False, prunable)):
            found = _against(groups[order[0]], groups[s], key, lower)
            if any(found.values()):
                said.append(
                    _count(found, words) + (_overlap(groups[order[0]], groups[s]) if key == "steps_to_99" else "")
                )
            if found["better"] and found["worse"]:
                what = f"steps to {MILESTONE_TEXT}" if key == "steps_to_99" else "prunable fraction"
                disagree.append(f"{names[s]} against {names[order[0]]} on {what}")
        if said:
            lines.append(f"{names[s]} against {names[order[0]]}: " + "; ".join(said) + ".")
    for a, b in pairwise(order[1:]):
        found = _against(groups[a], groups[b], "steps_to_99", True)
        if found["better"] and found["worse"]:
            disagree.append(f"{names[b]} against {names[a]} on steps to {MILESTONE_TEXT} ({_count(found, steps)})")
    return lines, disagree


def _overlap(base: list[dict], other: list[dict]) -> str:
    """' (the ranges overlap)' or ' (the ranges do not overlap)': whether seed-to-seed spread could explain it."""
    a = [r["steps_to_99"] for r in base if r["steps_to_99"] is not None]
    b = [r["steps_to_99"] for r in other if r["steps_to_99"] is not None]
    if len(a) < 2 and len(b) < 2 or not a or not b:
        return ""  # one seed each: no range to speak of
    apart = max(a) < min(b) or max(b) < min(a)
    span = lambda v: _num(min(v)) if min(v) == max(v) else f"{_num(min(v))}..{_num(max(v))}"  # noqa: E731
    return f" (their ranges {'do not overlap' if apart else 'overlap'}: {span(b)} against {span(a)})"


def _spread_pct(group: list[dict]) -> str:
    values = [r["test_exact_match"] for r in group if r["test_exact_match"] is not None]
    if not values:
        return "—"
    lo, hi = min(values), max(values)
    return _pct(lo) if lo == hi else f"{_pct(lo)}..{_pct(hi)}"


def markdown(rows: list[dict]) -> str:
    """The conclusion as the end of sweep_summary.md."""
    return "\n".join(["## Conclusion", "", *(f"- {line}" for line in conclude(rows))]) + "\n"
