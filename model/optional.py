"""The optional ``interop`` extra (transformers, transformer-lens, safetensors): checked before use, so a
missing package is one line that names the command to install it, never a traceback from deep inside."""

from __future__ import annotations

import importlib

INTEROP_INSTALL = 'pip install -e ".[interop]"'


class MissingExtraError(ImportError):
    """An optional package is not installed; the message is one line naming the pip command."""


def require(feature: str, *modules: str) -> None:
    """Import ``modules`` or raise :class:`MissingExtraError`, e.g. require("--export hf", "transformers")."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing = getattr(e, "name", None) or name
            raise MissingExtraError(
                f"{feature} needs the optional package {missing!r}, which is not installed; "
                f"install the interop extra:  {INTEROP_INSTALL}"
            ) from None
