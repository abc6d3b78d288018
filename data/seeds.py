"""Seeds derived from a run's seed and a counter, for the draws that must repeat exactly when a run resumes: each
training step's (training/step_seeds.py) and each epoch's shuffle of a fixed training set (data/epochs.py)."""

from __future__ import annotations

import hashlib


def derived_seed(*parts: object) -> int:
    """A seed hashed from ``parts`` (e.g. "step", seed, step): every one of them counts, neighbouring values give
    unrelated seeds, and computing it reads nothing back from a device (plain Python)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # torch takes seeds below 2**63
