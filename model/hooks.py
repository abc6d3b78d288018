"""Hook points by name: read, replace or ablate what a head computes, the way TransformerLens does it.

Every hook point is a :class:`HookPoint` (an identity layer) named by what it holds (``blocks.1.attn.hook_z``:
layer 1's head outputs before ``W_o``). Analyses never pass extra arguments to ``forward``: they run the model
under :func:`hooks`, and ablation and patching are hooks that return a replacement.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

# the points of one block, then the model's own
BLOCK_POINTS = ("hook_resid_pre", "attn.hook_pattern", "attn.hook_z")
FINAL_POINT = "hook_resid_final"

HookFn = Callable[[torch.Tensor], torch.Tensor | None]  # the point's value -> a replacement, or None to keep it


class HookPoint(nn.Module):
    """An identity layer that names a value inside the model (TransformerLens's ``HookPoint``): a hook added with
    :meth:`add_hook` reads the value, or replaces it by returning another. The point keeps its hooks itself, so a
    block can ask :attr:`has_hooks` (the attention block computes its weights only when someone reads them)."""

    def __init__(self):
        super().__init__()
        # the hooks by their handle's id, in the order added (an OrderedDict: a handle keeps a weak reference to it)
        self.fns: OrderedDict[int, HookFn] = OrderedDict()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for fn in self.fns.values():
            out = fn(x)
            x = x if out is None else out
        return x

    @property
    def has_hooks(self) -> bool:
        return bool(self.fns)

    def add_hook(self, fn: HookFn) -> RemovableHandle:
        """Run ``fn`` on every value passing through, until the handle returned is removed."""
        handle = RemovableHandle(self.fns)
        self.fns[handle.id] = fn
        return handle


def head_label(layer: int, head: int) -> str:
    """(1, 0) -> 'L1h0': how every table, figure and page names a head."""
    return f"L{layer}h{head}"


def hook_name(layer: int, point: str) -> str:
    """(1, 'attn.hook_z') -> 'blocks.1.attn.hook_z'."""
    return f"blocks.{layer}.{point}"


def hook_names(net: nn.Module) -> list[str]:
    """Every hook point of ``net``, in the order a forward pass reaches them."""
    return [hook_name(i, p) for i in range(len(net.blocks)) for p in BLOCK_POINTS] + [FINAL_POINT]


@contextmanager
def hooks(net: nn.Module, fns: dict[str, HookFn]) -> Iterator[None]:
    """Within the block, each named point's value goes through its function (a returned tensor replaces it)."""
    handles: list[RemovableHandle] = []
    try:
        for name, fn in fns.items():
            handles.append(net.get_submodule(name).add_hook(fn))
        yield
    finally:
        for handle in handles:
            handle.remove()


def set_heads(heads: dict[int, torch.Tensor | float]) -> HookFn:
    """A hook_z function setting each given head's output to its value (see :func:`head_replacements`)."""

    def fn(z: torch.Tensor) -> torch.Tensor:  # z: (B, T, n_heads, head_dim)
        z = z.clone()
        for head, value in heads.items():
            z[:, :, head] = value
        return z

    return fn


def head_replacements(replacements: dict[tuple[int, int], torch.Tensor | float]) -> dict[str, HookFn]:
    """{(layer, head): value} -> hooks that set that head's z to ``value`` (0.0 zero-ablates it; a (T, head_dim)
    mean ablates it by its mean; a (B, T, head_dim) tensor patches in another run's output)."""
    by_layer: dict[int, dict[int, torch.Tensor | float]] = {}
    for (layer, head), value in replacements.items():
        by_layer.setdefault(layer, {})[head] = value
    return {hook_name(layer, "attn.hook_z"): set_heads(heads) for layer, heads in by_layer.items()}


@contextmanager
def ablated(net: nn.Module, heads: dict[tuple[int, int], torch.Tensor | float]) -> Iterator[None]:
    """Run ``net`` with the given heads' outputs replaced (see :func:`head_replacements`)."""
    with hooks(net, head_replacements(heads)):
        yield


def zero_ablated(net: nn.Module, heads):
    """Run ``net`` with the given (layer, head) pairs switched off (their output x 0 before ``W_o``)."""
    return ablated(net, dict.fromkeys(heads, 0.0))


def zero_ablated_heads(attn: nn.Module, heads):
    """Run one attention block on its own with the given heads switched off at its ``hook_z``."""
    return hooks(attn, {"hook_z": set_heads(dict.fromkeys(heads, 0.0))})
