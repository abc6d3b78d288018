"""Every analysis a run records, in the order the page and the terminal show them.

Adding an analysis is one file in analysis/metrics/ and one line here, "<file>:<class>" as in Python's entry
points (docs/architecture.md, "Add a metric", shows one). The order is only where each appears: what one
analysis reads of another it declares (``needs``) and gets from ``ctx.result``, computed once, whichever comes first.
"""

from functools import cache
from importlib import import_module

from analysis.metric import Analysis

REGISTERED = (
    "roles:Roles",
    "ablation:Ablation",
    "pruning:Pruning",
    "dla:DirectLogitAttribution",
    "patching:Patching",
    "circuit:CircuitAnalysis",
    "circuit_roles:CircuitRoles",
    "head_story:HeadStory",
    "division_length:Length",  # length.py's, with divisions drawn as they must be
)


def registered(entries) -> list[Analysis]:
    """The analyses of "<file>:<class>" entries, each checked (``Analysis.check``), their names each once."""
    analyses = []
    for entry in entries:
        module, name = entry.split(":")
        analysis = getattr(import_module(f"analysis.metrics.{module}"), name)()
        analysis.check()
        if analysis.name in {a.name for a in analyses}:
            raise ValueError(f"{entry}: another registered analysis is named {analysis.name!r}")
        analyses.append(analysis)
    return analyses


@cache
def analyses() -> tuple[Analysis, ...]:
    """The registered analyses, imported, built and checked at the first call (importing this module does none)."""
    return tuple(registered(REGISTERED))
