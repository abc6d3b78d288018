"""The registered analyses, one per file (see analysis/registry.py for the list and docs/architecture.md)."""
