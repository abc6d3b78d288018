"""Your own attention block in the calculator: ``python train.py model.attention=mine.py:MultiHeadAttention``.

A learner who has typed the lesson's block -- ``__init__(embed_dim, num_heads)``, four ``nn.Linear`` projections
(``W_q W_k W_v W_o``), ``forward(x, mask=None)`` returning the output (the weights beside it, or not) -- trains the
calculator with it. This module finds the class (``FILE.py:CLASS`` or ``package.module:CLASS``) and hashes its
source (:func:`load_block`), and puts each layer's block inside :class:`OwnAttention`, which gives it what the rest
of the project reads of an attention block, asking nothing more of the learner's code:

    hook_z        each head's output before W_o: the input of the block's W_o, read through a forward pre-hook
    hook_pattern  the heads' weights: the (B, n_heads, T, T) softmax the block takes, caught as it is taken
    the mask      passed the way the block reads it (True where a token may look, or True where it may not;
                  model/check.py finds which before training)
    a KV cache    the inputs seen so far: the block attends over all of them again (greedy decoding stays right)
    state_dict    under the lesson's names (attn.W_q.weight, ...): a checkpoint reads like one of ours, so
                  calc.py, analyse.py and the lab run the trained weights in the lesson's block, importing nothing
                  of the learner's file -- a run directory is data, never code
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from model.hooks import HookPoint

PROJECTIONS = ("W_q", "W_k", "W_v", "W_o")
# what lessons and libraries call each projection, the lesson's own name first
ALIASES = {
    "W_q": ("W_q", "W_Q", "q_proj", "query", "q"),
    "W_k": ("W_k", "W_K", "k_proj", "key", "k"),
    "W_v": ("W_v", "W_V", "v_proj", "value", "v"),
    "W_o": ("W_o", "W_O", "out_proj", "o_proj", "proj", "out", "fc_out", "c_proj"),
}
MASK_STYLES = {  # how a block reads ``mask``: its name -> what model/check.py and the summary say of it
    "keep": "True where a token may look (masked_fill(mask == 0, -inf))",
    "hide": "True where a token may not look (masked_fill(mask, -inf))",
    "none": "the block masks the future itself (forward(x), no mask passed)",
}
SOFTMAXES = {torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax, torch.special.softmax}


class BlockError(ValueError):
    """A learner's block that cannot be loaded or used, as one line saying what to change."""


def projections(block: nn.Module) -> dict[str, str]:
    """The lesson's name of each of the block's four projections -> the block's own attribute name, found by name
    (ALIASES) or, failing that, as its first four ``nn.Linear`` layers in the order written; BlockError naming
    what is missing."""
    linears = [name for name, m in block.named_children() if isinstance(m, nn.Linear)]
    found = {ours: next((a for a in ALIASES[ours] if a in linears), None) for ours in PROJECTIONS}
    if None in found.values() and len(linears) == 4 and not any(found.values()):
        found = dict(zip(PROJECTIONS, linears, strict=True))  # named its own way: the lesson's order
    missing = [ours for ours, name in found.items() if name is None]
    if missing == ["W_o"]:
        raise BlockError(
            "W_o missing: the block has no output projection (step 9: W_o mixes the concatenated heads back into "
            "d_model); add self.W_o = nn.Linear(embed_dim, embed_dim) and return self.W_o(concat)"
        )
    if missing:
        has = ", ".join(linears) or "none"
        raise BlockError(
            f"{' '.join(missing)} not found: the block's nn.Linear layers are {has}; the lesson's block has four, "
            "W_q W_k W_v W_o (step 1: project), each nn.Linear(embed_dim, embed_dim)"
        )
    return found


def causal_mask(T: int, style: str, device) -> torch.Tensor | None:
    """(T, T) boolean: the causal mask as a block of ``style`` reads it (MASK_STYLES); None for "none"."""
    may_look = torch.ones(T, T, dtype=torch.bool, device=device).tril()
    return {"keep": may_look, "hide": ~may_look, "none": None}[style]


def call_block(block: nn.Module, x: torch.Tensor, style: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Run a learner's block on ``x`` (B, T, d_model) with the causal mask in ``style``: (out, weights or None),
    whether its forward returns the output alone or the output and the weights."""
    mask = causal_mask(x.shape[1], style, x.device)
    out = block(x) if mask is None else block(x, mask=mask)
    if isinstance(out, (tuple, list)):
        return out[0], (out[1] if len(out) > 1 and isinstance(out[1], torch.Tensor) else None)
    return out, None


class Softmaxes(TorchFunctionMode):
    """While active, every softmax whose result is (B, n_heads, T, T) -- the heads' weights -- goes through
    ``point`` (read, or replaced by what its hooks return); the last one is kept as ``weights``."""

    def __init__(self, point: HookPoint, n_heads: int):
        super().__init__()
        self.point, self.n_heads, self.weights = point, n_heads, None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))  # the mode is off inside: the softmax's own calls are not seen again
        if func in SOFTMAXES and out.dim() == 4 and out.shape[1] == self.n_heads and out.shape[2] == out.shape[3]:
            out = self.weights = self.point(out)
        return out


class OwnAttention(nn.Module):
    """A learner's attention block in the calculator's place: called as ``MultiHeadAttention`` is
    (model/attention.py), with the same two hook points and the same state-dict names (see the module's doc)."""

    def __init__(self, block: nn.Module, n_heads: int, mask: str):
        super().__init__()
        self.block, self.mask = block, mask
        self.names = projections(block)  # "W_q" -> the block's own attribute name
        self.d_model, self.n_heads = self.W_q.in_features, n_heads
        self.n_kv_heads, self.head_dim = n_heads, self.d_model // n_heads
        self.hook_pattern = HookPoint()  # (B, n_heads, T_q, T_k)
        self.hook_z = HookPoint()  # (B, T_q, n_heads, head_dim)
        self.W_o.register_forward_pre_hook(self._through_hook_z)
        self.register_state_dict_post_hook(_lesson_names)
        self.register_load_state_dict_pre_hook(_own_names)

    W_q = property(lambda self: getattr(self.block, self.names["W_q"]))
    W_k = property(lambda self: getattr(self.block, self.names["W_k"]))
    W_v = property(lambda self: getattr(self.block, self.names["W_v"]))
    W_o = property(lambda self: getattr(self.block, self.names["W_o"]))

    def _through_hook_z(self, _, args):
        """W_o's input, the heads concatenated (B, T, n_heads * head_dim), through hook_z as (B, T, n_heads,
        head_dim)."""
        if not self.hook_z.has_hooks:
            return None
        concat = args[0]
        z = self.hook_z(concat.view(*concat.shape[:-1], self.n_heads, self.head_dim))
        return (z.reshape(concat.shape), *args[1:])

    def forward(self, x, context=None, mask=None, need_weights=False, cache=None, scores=None):
        """As ``MultiHeadAttention.forward`` for self-attention with the causal mask: x (B, T_q, d_model) ->
        (out (B, T_q, d_model), the weights (B, n_heads, T_q, T_k) if asked, else None)."""
        if context is not None or mask is not None or scores is not None:
            raise BlockError("a learner's block attends causally to itself: no context, extra mask or position scores")
        seen = x if cache is None else cache.append(x, x)[0]  # with a cache: every input so far, (B, T_k, d_model)
        watch = Softmaxes(self.hook_pattern, self.n_heads) if need_weights or self.hook_pattern.has_hooks else None
        with watch or nullcontext():
            out, _ = call_block(self.block, seen, self.mask)
        new = x.shape[1]  # the positions asked for: the last T_q of what the block saw
        weights = watch.weights[..., -new:, :] if need_weights and watch.weights is not None else None
        return out[:, -new:], weights


def _lesson_names(module: OwnAttention, state: dict, prefix: str, _) -> None:
    """state_dict post-hook: the block's projections under the lesson's names; a bias the block lacks as zeros (the
    lesson's block with that bias zero computes the same); the block's buffers are its own (rebuilt by __init__)."""
    inner = f"{prefix}block."
    for ours, theirs in module.names.items():
        linear = getattr(module.block, theirs)
        state[f"{prefix}{ours}.weight"] = state.pop(f"{inner}{theirs}.weight")
        bias = state.pop(f"{inner}{theirs}.bias", None)
        zero = torch.zeros_like(linear.weight[:, 0])  # (out_features,), on the weight's device and dtype
        state[f"{prefix}{ours}.bias"] = zero if bias is None else bias
    for key in [k for k in state if k.startswith(inner)]:
        del state[key]


def _own_names(module: OwnAttention, state: dict, prefix: str, *_) -> None:
    """load_state_dict pre-hook: the lesson's names back to the block's own (the reverse of :func:`_lesson_names`)."""
    inner = f"{prefix}block."
    for ours, theirs in module.names.items():
        linear = getattr(module.block, theirs)
        for part in ("weight", "bias"):
            key = f"{prefix}{ours}.{part}"
            if key in state and (part == "weight" or linear.bias is not None):
                state[f"{inner}{theirs}.{part}"] = state.pop(key)
            elif key in state and state.pop(key).abs().max() > 0:
                raise BlockError(f"{ours} has no bias in this block, but the weights give it one")
    for name, buffer in module.block.named_buffers():  # the block's own, as its __init__ made them
        state.setdefault(f"{inner}{name}", buffer)


@dataclass(frozen=True)
class OwnBlock:
    """A learner's block class as a run records it: the spec typed, the class, its source's sha256 and how its
    forward reads the mask (model/check.py's finding). ``to_dict``: what a checkpoint's ``model`` keeps of it."""

    spec: str
    cls: type
    source: str
    sha256: str
    mask: str = "keep"

    def block(self, d_model: int, n_heads: int, *_) -> OwnAttention:
        """Called as MultiHeadAttention is (model/transformer.py); the rest of its arguments are the lesson's
        defaults here (model/build.py refuses others)."""
        return OwnAttention(self.cls(d_model, n_heads), n_heads, self.mask)

    def to_dict(self) -> dict:
        return {"attention": self.spec, "attention_sha256": self.sha256}


def load_block(spec: str) -> tuple[type, str, str]:
    """``FILE.py:CLASS`` (a path, from the current directory) or ``package.module:CLASS`` -> (the class, its file's
    source, that source's sha256); BlockError saying what is wrong."""
    where, _, name = str(spec).rpartition(":")
    if not where or not name.isidentifier():
        raise BlockError(f"name the file and the class, as FILE.py:CLASS (mine.py:MultiHeadAttention), not {spec!r}")
    if where.endswith(".py"):
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise BlockError(f"{where}: no such file (from {Path.cwd()})")
        source = path.read_text(encoding="utf-8", errors="replace")
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        module_name = f"tinycalc_own_block_{sha[:16]}"  # one module per version of the file
        module = sys.modules.get(module_name)
        if module is None:
            loader = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(loader)
            try:
                loader.loader.exec_module(module)
            except Exception as e:  # noqa: BLE001 -- the learner's file may raise anything as it runs
                raise BlockError(f"{where} does not run: {_where_in(e, path)}") from None
            sys.modules[module_name] = module
    else:
        try:
            module = importlib.import_module(where)
        except Exception as e:  # noqa: BLE001
            raise BlockError(f"{where} does not import: {type(e).__name__}: {e}") from None
        file = getattr(module, "__file__", None)
        source = Path(file).read_text(encoding="utf-8", errors="replace") if file else ""
        sha = hashlib.sha256(source.encode()).hexdigest()
    cls = getattr(module, name, None)
    if cls is None:
        classes = sorted(k for k, v in vars(module).items() if isinstance(v, type) and v.__module__ == module.__name__)
        raise BlockError(f"{where} has no {name} (its classes: {', '.join(classes) or 'none'})")
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise BlockError(f"{where}:{name} is not a torch.nn.Module class (class {name}(nn.Module): ...)")
    return cls, source, sha


def _where_in(e: Exception, path: Path) -> str:
    """An exception raised running the learner's file, as 'SyntaxError: invalid syntax (line 12)'."""
    line = getattr(e, "lineno", None)
    tb = e.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    message = getattr(e, "msg", None) or str(e)
    return f"{type(e).__name__}: {message}" + (f" (line {line})" if line else "")
