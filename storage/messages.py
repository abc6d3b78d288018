"""An error as one line: what every one-line report of the project (bad files, bad configs, bad checkpoints)
writes of an exception it caught; and a count in words ("1 head", "4 heads")."""

from __future__ import annotations


def one_line(error: BaseException, limit: int = 120, sentence: bool = False) -> str:
    """The first line of ``error``'s message (its first sentence with ``sentence``), cut at ``limit`` characters;
    the exception's type name when it has no message."""
    line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    line = line.split(". ")[0] if sentence else line
    return line if len(line) <= limit else line[:limit] + "..."


def counted(n: int, thing: str) -> str:
    """``n`` things in words: "1 head", "4 heads"."""
    return f"{n} {thing}{'' if n == 1 else 's'}"
