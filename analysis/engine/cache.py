"""One forward pass, every activation an analysis reads (TransformerLens's ``run_with_cache``).

cache = run_with_cache(net, inputs)          inputs (N, T) -> every hook point's value over the N rows
cache["blocks.0.attn.hook_pattern"]          (N, n_heads, T, T)
cache.stack("attn.hook_z")                   (n_layers, N, T, n_heads, head_dim)
cache[:10]                                   the same cache for the first 10 rows (views, no copy)
"""

from __future__ import annotations

import torch

from model.hooks import hook_name, hook_names, hooks


class ActivationCache(dict):
    """Hook name -> the value there, batch first; ``logits`` (N, T, vocab) from the same pass."""

    def __init__(self, values: dict[str, torch.Tensor], logits: torch.Tensor, n_layers: int):
        super().__init__(values)
        self.logits, self.n_layers = logits, n_layers

    def __getitem__(self, key):
        if isinstance(key, slice):  # rows of the batch
            return ActivationCache({k: v[key] for k, v in self.items()}, self.logits[key], self.n_layers)
        return super().__getitem__(key)

    def __len__(self) -> int:
        return len(self.logits)

    def layer(self, layer: int, point: str) -> torch.Tensor:
        return self[hook_name(layer, point)]

    def stack(self, point: str) -> torch.Tensor:
        """One point of every block, stacked: (n_layers, N, ...)."""
        return torch.stack([self.layer(i, point) for i in range(self.n_layers)])


@torch.no_grad()
def run_with_cache(net, inputs: torch.Tensor, names: list[str] | None = None, batch_size: int = 5000):
    """Run ``net`` on ``inputs`` (N, T) token ids once, keeping every hook point's value (or only ``names``)."""
    names = hook_names(net) if names is None else names
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    logits = []
    with hooks(net, {name: parts[name].append for name in names}):  # append returns None: values unchanged
        for chunk in inputs.split(batch_size):
            logits.append(net(chunk)[0])
    values = {name: torch.cat(chunks) for name, chunks in parts.items()}
    return ActivationCache(values, torch.cat(logits), len(net.blocks))
