"""Beyond the trained length: exact-match by operand length, for a model that can address longer problems than it
trained on (``model.place_offset``); nothing for a model that cannot (analysis/length.py)."""

from __future__ import annotations

from analysis.length import LengthRow, accuracy_by_length, longest_learned
from analysis.length_figure import length_curves
from analysis.metric import Analysis, Column, Context
from data.tokenizer import CharTokenizer
from model.calculator import Calculator


class Length(Analysis):
    name = "length"
    title = "Beyond the trained length"
    intro = (
        "Exact-match on problems whose operands both have the given number of digits, from 1 to as many as the "
        "model can address. The shaded range is the lengths it trained on; beyond it, the model adds numbers "
        "longer than any it has seen, or not."
    )
    columns = (
        Column("operator", "operator"),
        Column("digits", "digits"),
        Column("trained", "trained length"),
        Column("n", "problems"),
        Column("exact_match", "exact-match", "fraction"),
        Column("digit_accuracy", "digit accuracy", "fraction"),
    )
    figure_key = "curve"

    def compute(self, ctx: Context) -> list[LengthRow]:
        calc = Calculator(ctx.module.net, ctx.fmt, CharTokenizer())
        if calc.longest <= calc.trained_digits or not ctx.length_problems:
            return []
        return accuracy_by_length(calc, list(range(1, calc.longest + 1)), ctx.length_problems)

    def figure(self, rows: list[LengthRow], ctx: Context):
        return length_curves({f"'{op}'": self.curve(rows, op) for op in ctx.fmt.operators}, ctx.fmt.digits)

    @staticmethod
    def curve(rows: list[LengthRow], op: str) -> dict[int, float]:
        return {r.digits: r.exact_match for r in rows if r.operator == op}

    def results(self, rows: list[LengthRow], ctx: Context) -> dict:
        return {
            "length_exact_match": {op: self.curve(rows, op) for op in ctx.fmt.operators},
            "length_trained_digits": ctx.fmt.digits,
            "length_longest_99": min(longest_learned(rows, op) for op in ctx.fmt.operators),
        }

    def summary(self, rows: list[LengthRow], ctx: Context) -> list[tuple[str, str]]:
        lines = []
        for op in ctx.fmt.operators:
            curve, trained = self.curve(rows, op), ctx.fmt.digits
            marks = [w for w in (2 * trained, 3 * trained, max(curve)) if w in curve]
            shown = ", ".join(f"{curve[w]:.1%} at {w} digits" for w in dict.fromkeys(marks))
            lines.append(
                (
                    f"length '{op}'",
                    f"{shown}; >= 99% up to {longest_learned(rows, op)} digits (trained on 1-{trained})",
                )
            )
        return lines
