"""A whole-number setting checked one way everywhere: a ValueError that names the key, its value and the rule."""

from __future__ import annotations


def is_whole(value) -> bool:
    """An int that is not a bool (true is not 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_whole(name: str, value, least: int = 1, hint: str = "", most: int | None = None) -> None:
    """ValueError ``name=value: must be a whole number >= least`` (``in [least, most]`` where ``most`` is given, and
    ``hint``) unless ``value`` is one."""
    if not is_whole(value) or value < least or (most is not None and value > most):
        rule = f">= {least}" if most is None else f"in [{least}, {most}]"
        raise ValueError(f"{name}={value!r}: must be a whole number {rule}{hint}")
