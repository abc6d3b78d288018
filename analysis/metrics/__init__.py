"""The registered analyses, one per file: its rows, its computation and how the page shows it (the list is
analysis/registry.py; the engines they share are analysis/engine/)."""
