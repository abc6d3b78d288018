"""The sampler: problems of one split, drawn with :meth:`ProblemFormat.random_problems` and kept
where the split hash (:meth:`ProblemFormat.split_of`) says they belong -- held-out sets once, training batches as a
fresh stream (data/stream.py).
"""

from __future__ import annotations

import math

import torch

from data.problems import SPLITS, ProblemFormat

ENUMERATE_LIMIT = 4_000_000  # problem spaces up to this size are listed in full when sampling held-out sets


class ProblemSampler:
    """Draws problems of one split: held-out sets once, training batches as a fresh stream."""

    def __init__(self, fmt: ProblemFormat, val_fraction: float = 0.01, test_fraction: float = 0.01):
        for name, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 0.5:
                raise ValueError(f"{name}={value!r}: must be in (0, 0.5)")
        fmt.check_vectorised()
        self.fmt = fmt
        self.fractions = {"val": val_fraction, "test": test_fraction}
        self.train_fraction = 1.0 - val_fraction - test_fraction

    def split_of(self, a: torch.Tensor, op_idx: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.fmt.split_of(a, op_idx, b, self.fractions["val"], self.fractions["test"])

    def sample(self, split: str, n: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """n problems of ``split``. Held-out sets are distinct problems (capped at the split's size);
        training draws are independent, so a stream may repeat a problem, as sampling with replacement does."""
        split_id, device = SPLITS.index(split), generator.device
        if split != "train" and self.fmt.n_problems <= ENUMERATE_LIMIT:  # a small space: list it, pick from it
            a, op_idx, b = self.fmt.all_problems(device)
            keep = (self.split_of(a, op_idx, b) == split_id).nonzero().squeeze(1)
            pick = keep[torch.randperm(len(keep), generator=generator, device=device)[:n]]
            return a[pick], op_idx[pick], b[pick]
        fraction = self.train_fraction if split == "train" else self.fractions[split]
        parts, have, seen = [(torch.zeros(0, dtype=torch.int64, device=device),) * 3], 0, set()  # n=0 works too
        while have < n:  # draw, keep the split's problems, until there are n
            a, op_idx, b = self.fmt.random_problems(math.ceil((n - have) / fraction * 1.1) + 64, generator)
            keep = self.split_of(a, op_idx, b) == split_id
            if split != "train":  # held-out sets hold distinct problems
                for i in keep.nonzero().squeeze(1).tolist():
                    key = (int(a[i]), int(op_idx[i]), int(b[i]))
                    keep[i] = key not in seen
                    seen.add(key)
            kept = keep.nonzero().squeeze(1)  # on a GPU, the draw's one wait: how many were kept
            parts.append((a[kept], op_idx[kept], b[kept]))
            have += len(kept)
        return tuple(torch.cat(column)[:n] for column in zip(*parts, strict=True))
