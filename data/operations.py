"""The operations a format may hold beyond the lesson's ``+ - *``, registered by symbol: adding one is a file that
defines its :class:`data.operation.Operation` and one line here (docs/architecture.md, "Add an operation"). A model
that does one has its symbol as a token after the lesson's vocabulary, in this table's order (data/division.py), so
every token a model had keeps its id when one is added at the end.
"""

from __future__ import annotations

from data.operation import Operation
from data.quotient import DIVISION

LESSON = {"+": "addition", "-": "subtraction", "*": "multiplication"}  # data/problems.py's, by symbol
OPERATIONS: dict[str, Operation] = {}  # by symbol, in the order registered


def register(operation: Operation) -> None:
    """Add ``operation`` at the end of the table (ValueError if its symbol is taken; the lesson's never are:
    :class:`Operation` refuses them)."""
    if operation.symbol in OPERATIONS:
        taken = OPERATIONS[operation.symbol].name
        raise ValueError(f"operation {operation.name!r}: its symbol {operation.symbol!r} is {taken}'s; give another")
    OPERATIONS[operation.symbol] = operation


def symbols() -> str:
    """Every operator a format may hold: the lesson's, then the registered ones in their order."""
    return "".join(LESSON) + "".join(OPERATIONS)


def name_of(symbol: str) -> str:
    """An operator's name ("division"), or the symbol quoted for one nothing registers."""
    return LESSON.get(symbol) or (OPERATIONS[symbol].name if symbol in OPERATIONS else f"'{symbol}'")


register(DIVISION)
