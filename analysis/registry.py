"""Every analysis a run records, in the order they run (a later one may read an earlier one's rows).

Adding a metric: one file in analysis/metrics/ and one line here (docs/architecture.md shows an example).
"""

from analysis.metrics.ablation import Ablation
from analysis.metrics.pruning import Pruning
from analysis.metrics.roles import Roles

ANALYSES = [
    Roles(),
    Ablation(),
    Pruning(),
]
