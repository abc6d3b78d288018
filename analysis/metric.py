"""What an analysis is: compute rows (pure), draw them (a figure, optional), say what they mean.

An :class:`Analysis` knows nothing of files, wandb or the page; the pipeline (analysis/pipeline.py) runs every
registered one (analysis/registry.py), the recorder (analysis/record.py) writes and logs what it returns, and
the page renders it from the metadata it declares. A :class:`HeadMetric` has one row per head (and variant):
the page shows it as a layer x head heatmap, a table and a line under each head, knowing it by no name.

What one analysis reads of another is declared and typed: ``needs = (Roles,)`` and, in ``compute``,
``ctx.result(Roles)`` -- the other's rows, computed on first request and kept, whatever the registry's order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import torch
    from matplotlib.figure import Figure

    from analysis.engine.cache import ActivationCache
    from analysis.engine.evaluator import Evaluator
    from analysis.engine.graph import ComponentGraph
    from analysis.engine.pair_runs import PairRuns
    from model.calculator import TrainedModel

T = TypeVar("T")

# Below this test exact-match a model has not learned its task: switching its heads off can cost nothing because
# there is nothing to lose, so no pruning fraction or head role is claimed for it (summaries say "not learned").
LEARNED = 0.9


def learned(exact_match) -> bool:
    """Whether a model with this test exact-match has learned enough for pruning and role claims."""
    return isinstance(exact_match, (int, float)) and exact_match >= LEARNED


def not_learned_text(exact_match: float) -> str:
    return f"not learned ({exact_match:.1%} held-out exact-match, below {LEARNED:.0%}): no pruning or role claims"


# A column's unit: how the page (analysis/report_page.js: byUnit) writes and colours its values.
UNITS = {
    "fraction": "a share, shown as %",
    "points": "a change of a fraction, shown as ± points",
    "logit": "logits, shown signed",
    "nats": "a loss or an entropy",
    "": "a count or text, shown as it is",
}


@dataclass(frozen=True)
class Column:
    """One column of an analysis's rows: its key (CSV header), a label for people, and its unit (one of UNITS)."""

    key: str
    label: str
    unit: str = ""

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            allowed = ", ".join(f"{unit!r} ({meaning})" for unit, meaning in UNITS.items())
            raise ValueError(f"column {self.key!r}: unit {self.unit!r} is not one the page draws; use one of {allowed}")


class Product(Generic[T]):
    """Something computed from a run's :class:`Context` once, on first request: ``ctx.result(ProductClass)``.

    Every :class:`Analysis` is one (its rows); a product that is no analysis holds what several analyses read
    (e.g. the circuits). ``needs``: the products ``compute`` reads through ``ctx.result``; reading one it does
    not declare is an error."""

    needs: tuple[type[Product], ...] = ()

    def compute(self, ctx: Context) -> T:
        raise NotImplementedError


@dataclass
class Context:
    """What every analysis of one run reads: the model, the problems, one activation cache of them, the settings,
    the shared engines (built on first use), and what other analyses computed (``result``)."""

    module: TrainedModel  # a Calculator, or training's CalculatorModule
    problems: torch.Tensor  # (N, seq_len) test problems
    cache: ActivationCache  # one forward pass over problems[:, :-1]
    evaluator: Evaluator  # scores under head replacements, from the cache
    tolerance: float  # exact-match a pruning may lose
    ablation_kinds: tuple[str, ...] = ("zero", "mean")
    prune: str | None = "ranked"
    length_problems: int = 0  # problems per operator and length for the length analysis (0: none)
    circuits: bool = False  # whether the circuits (opt-in, slow) are found: an analysis may read them only then
    results: dict[type[Product], Any] = field(default_factory=dict)  # what each product computed, by its class
    _computing: list[type[Product]] = field(default_factory=list, init=False, repr=False)  # innermost last

    @property
    def fmt(self):
        return self.module.fmt

    @property
    def n_layers(self) -> int:
        return self.module.net.cfg.n_layers

    @property
    def n_heads(self) -> int:
        return self.module.net.cfg.n_heads

    @cached_property
    def graph(self) -> ComponentGraph:
        """The network as components and edges (patching, circuits). It recomputes each head's attention with the
        lesson's block's own steps, so a learner's block (model/own_block.py), which runs only as a whole, has none."""
        from analysis.engine.graph import ComponentGraph

        if not all(hasattr(block.attn, "fused_attention") for block in self.module.net.blocks):
            raise CannotRun("it recomputes each head with model/attention.py's steps (python analyse.py RUN can)")
        return ComponentGraph(self.module.net)

    @cached_property
    def digit_runs(self) -> list[PairRuns]:
        """The clean / corrupted runs of every written digit the model tells apart (patching, circuits)."""
        from analysis.engine.pair_runs import digit_runs

        return digit_runs(self.graph, self.fmt, self.module.device)

    def result(self, product: type[Product[T]]) -> T:
        """What ``product`` computes for this run (an analysis's rows), computed on first request and kept.

        Inside a ``compute``, only a product its ``needs`` declare may be read: ValueError otherwise, or when
        products need each other in a circle."""
        if self._computing and product not in self._computing[-1].needs:
            reader = self._computing[-1].__name__
            raise ValueError(f"{reader} reads {product.__name__} undeclared: add it to {reader}.needs")
        if product not in self.results:
            if product in self._computing:
                circle = " -> ".join(p.__name__ for p in [*self._computing, product])
                raise ValueError(f"analyses that need each other: {circle}")
            self._computing.append(product)
            try:
                self.results[product] = product().compute(self)
            finally:
                self._computing.pop()
        return self.results[product]


class CannotRun(Exception):
    """An analysis that cannot run on this model, with the one-line reason: the pipeline says so and runs the
    others (analysis/pipeline.py)."""


VIEWS = ("heads", "curve", "graph", "table")  # how the page can show an analysis (report_page.js: a.view)


def points(fraction: float) -> str:
    """An exact-match margin in points: 0.01 -> '1 point', 0.025 -> '2.5 points'."""
    value = 100 * fraction
    return f"{value:g} point{'' if value == 1 else 's'}"


def as_dict(row: Any) -> dict:
    return asdict(row) if is_dataclass(row) else dict(row)


class Analysis(Product[list]):
    """One analysis of a trained run. Subclasses set the class attributes and implement ``compute``; what it reads
    of another analysis it declares in ``needs`` (inherited from :class:`Product`)."""

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

    def check(self) -> None:
        """What registering it checks, so a mistake fails at once, not on a run's page (ValueError saying what)."""
        where, keys = type(self).__name__, [c.key for c in self.columns]
        if not getattr(self, "name", "").replace("_", "").isalnum():
            raise ValueError(f"{where}.name={getattr(self, 'name', None)!r}: a file name such as my_metric")
        if self.view not in VIEWS:
            raise ValueError(f"{where}.view={self.view!r}: one of {', '.join(VIEWS)}")
        if len(set(keys)) != len(keys) or not all(isinstance(c, Column) for c in self.columns):
            raise ValueError(f"{where}.columns: Column(key, label, unit)s with keys each once, got {keys}")
        for need in self.needs:
            if not (isinstance(need, type) and issubclass(need, Product)):
                raise ValueError(f"{where}.needs: {need!r} is no analysis (or other Product) class")

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

    def check(self) -> None:
        super().check()
        where, keys, value = type(self).__name__, [c.key for c in self.columns], getattr(self, "value", None)
        if "layer" not in keys or "head" not in keys:
            raise ValueError(f"{where}.columns: a head metric has a 'layer' and a 'head' column; it has {keys}")
        if value not in keys:
            raise ValueError(f"{where}.value={value!r}: the column its heatmap shows, one of {keys}")
        if self.variant is not None and self.variant not in keys:
            raise ValueError(f"{where}.variant={self.variant!r}: one of its columns {keys}, or None")
        if self.scale not in ("loss", "signed"):
            raise ValueError(f"{where}.scale={self.scale!r}: loss or signed")

    def describe(self) -> dict:
        return super().describe() | {"value": self.value, "variant": self.variant, "scale": self.scale}
