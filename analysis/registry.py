"""Every analysis a run records, in the order they run (a later one may read an earlier one's rows).

Adding a metric is one file in analysis/metrics/ and one line here, "<file>:<class>" as in Python's entry points
(docs/architecture.md shows one).
"""

from importlib import import_module

REGISTERED = (
    "roles:Roles",
    "ablation:Ablation",
    "pruning:Pruning",
    "dla:DirectLogitAttribution",
    "patching:Patching",
    "circuit:CircuitAnalysis",
    "circuit_roles:CircuitRoles",
    "length:Length",
)


def _build(entry: str):
    module, name = entry.split(":")
    return getattr(import_module(f"analysis.metrics.{module}"), name)()


ANALYSES = [_build(entry) for entry in REGISTERED]
