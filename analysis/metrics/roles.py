"""Each head's job in one line, read from where its answer queries attend on average (analysis/roles.py)."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.metric import Column, Context, HeadMetric
from analysis.roles import describe_heads, mean_patterns


@dataclass
class RoleRow:
    layer: int
    head: int
    role: str


class Roles(HeadMetric):
    name = "roles"
    title = "What each head does"
    intro = (
        "Read from each head's mean attention over the test problems: where the queries that write the answer "
        "put their weight, named with the problem's vocabulary (a2 = a's hundreds digit, r0 = the result's units)."
    )
    columns = (Column("layer", "layer"), Column("head", "head"), Column("role", "role"))
    value = "role"

    def compute(self, ctx: Context) -> list[RoleRow]:
        roles = describe_heads(ctx.fmt, mean_patterns(ctx.cache))
        return [RoleRow(layer, head, role) for (layer, head), role in roles.items()]

    def results(self, rows: list[RoleRow], ctx: Context) -> dict:
        return {"head_roles": {f"L{r.layer}h{r.head}": r.role for r in rows}}

    def note(self, row: RoleRow) -> str:
        return row.role
