"""What an analysis is: compute rows (pure), draw them (a figure, optional), say what they mean.

An :class:`Analysis` knows nothing of files, wandb or the page; the pipeline (analysis/pipeline.py) runs every
registered one (analysis/registry.py), the recorder (analysis/record.py) writes and logs what it returns, and
the page renders it from the metadata it declares. A :class:`HeadMetric` has one row per head (and variant):
the page shows it as a layer x head heatmap, a table and a line under each head, knowing it by no name.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from typing import TYPE_CHECKING, Any

from data.problems import MASTERED

if TYPE_CHECKING:
    import torch
    from matplotlib.figure import Figure

    from analysis.ablation import Evaluator
    from analysis.cache import ActivationCache
    from model.module import CalculatorModule


MILESTONE = MASTERED  # the val exact-match whose first step curves mark and sweeps compare (steps_to_99)
# Below this test exact-match a model has not learned its task: switching its heads off can cost nothing because
# there is nothing to lose, so no pruning fraction or head role is claimed for it (summaries say "not learned").
LEARNED = 0.9


def learned(exact_match) -> bool:
    """Whether a model with this test exact-match has learned enough for pruning and role claims."""
    return isinstance(exact_match, (int, float)) and exact_match >= LEARNED


def not_learned_text(exact_match: float) -> str:
    return f"not learned ({exact_match:.1%} held-out exact-match, below {LEARNED:.0%}): no pruning or role claims"


@dataclass(frozen=True)
class Column:
    """One column of an analysis's rows: its key (CSV header), a label for people, and its unit.

    unit: "fraction" (shown as %), "points" (a change of a fraction, shown as ± points), "logit",
    "nats", "" (a count or text)."""

    key: str
    label: str
    unit: str = ""


@dataclass
class Context:
    """What every analysis of one run reads: the model, the problems, one activation cache of them, the settings,
    and the rows of the analyses that ran before it (``done[name]``)."""

    module: CalculatorModule
    problems: torch.Tensor  # (N, seq_len) test problems
    cache: ActivationCache  # one forward pass over problems[:, :-1]
    evaluator: Evaluator  # scores under head replacements, from the cache
    tolerance: float  # exact-match a pruning may lose
    ablation_kinds: tuple[str, ...] = ("zero", "mean")
    prune: str | None = "ranked"
    length_problems: int = 0  # problems per operator and length for the length analysis (0: none)
    done: dict[str, list] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)  # what several analyses read, computed once (e.g. pairs)

    @property
    def fmt(self):
        return self.module.fmt

    @property
    def n_layers(self) -> int:
        return self.module.net.cfg.n_layers

    @property
    def n_heads(self) -> int:
        return self.module.net.cfg.n_heads


def points(fraction: float) -> str:
    """An exact-match margin in points: 0.01 -> '1 point', 0.025 -> '2.5 points'."""
    value = 100 * fraction
    return f"{value:g} point{'' if value == 1 else 's'}"


def as_dict(row: Any) -> dict:
    return asdict(row) if is_dataclass(row) else dict(row)


class Analysis:
    """One analysis of a trained run. Subclasses set the class attributes and implement ``compute``."""

    name: str  # the files <name>.csv / <name>.png, the wandb keys <name>/table and <name>/<figure_key>
    title: str  # the page's section title
    intro: str  # one or two sentences under it: what was measured, how to read it
    columns: tuple[Column, ...] = ()
    figure_key: str = "figure"
    view: str = "table"  # how the page shows it: "heads" (HeadMetric), "curve", "graph" or "table"
    opt_in: str | None = None  # the HeadAnalysis switch that runs it (an analysis too slow to run on every run)

    def compute(self, ctx: Context) -> list:
        """Rows (dataclasses or dicts with the columns' keys): pure, no files, no figures, no wandb."""
        raise NotImplementedError

    def figure(self, rows: list, ctx: Context) -> Figure | None:
        return None

    def results(self, rows: list, ctx: Context) -> dict:
        """Entries for results.json."""
        return {}

    def summary(self, rows: list, ctx: Context) -> list[tuple[str, str]]:
        """Rows of the terminal summary: (label, text)."""
        return []

    def facts(self, rows: list, ctx: Context) -> dict:
        """What the page needs besides the rows and the class's description (e.g. a graph's node layout)."""
        return {}

    def table(self, rows: list) -> list[dict]:
        """The rows as {column key: value}, in the columns' order."""
        return [{c.key: as_dict(r).get(c.key) for c in self.columns} for r in rows]

    def describe(self) -> dict:
        """What the page needs to render this analysis, besides its rows."""
        return {
            "name": self.name,
            "title": self.title,
            "intro": self.intro,
            "view": self.view,
            "columns": [asdict(c) for c in self.columns],
        }


class HeadMetric(Analysis):
    """An analysis with one row per head (per variant): rows have ``layer`` and ``head`` columns."""

    view = "heads"
    value: str  # the column the heatmap shows
    variant: str | None = None  # a column with one heatmap per value (e.g. the ablation kind)
    # the heatmap's colour scale: "loss" (0 white, -1 deep red: a cost), "signed" (blue - white - red)
    scale: str = "signed"

    def note(self, row) -> str:
        """The line the page writes under a head (for the row of the first variant); "" for none."""
        return ""

    def describe(self) -> dict:
        return super().describe() | {"value": self.value, "variant": self.variant, "scale": self.scale}
