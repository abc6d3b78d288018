"""A small decoder-only (GPT-style) transformer built around :class:`MultiHeadAttention`: token + position embeddings
-> n_layers x [pre-LN attention, pre-LN MLP] -> LayerNorm -> LM head, with GPT-2's learned positions. A position
scheme of the length research (``model/positions.py``, put together by ``model/build.py``) may be given as
``places``: the network calls it at two named points -- what positions add to the tokens, what the scores get."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import nn
from torch.nn import functional as F

from data.checks import check_whole
from model.attention import KVCache, MultiHeadAttention, check_head_sizes
from model.hooks import HookPoint


@dataclass
class TransformerConfig:
    """Everything needed to rebuild the network; stored in every checkpoint."""

    vocab_size: int
    block_size: int  # longest sequence the position embedding covers
    d_model: int = 64
    n_heads: int = 4
    n_kv_heads: int | None = None
    n_layers: int = 2
    mlp_ratio: int = 4
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True
    places: object | None = None  # the length research's PlaceConfig (model/positions.py); None: learned positions
    attention: object | None = None  # a learner's own block (model/own_block.py's OwnBlock); None: the lesson's

    def __post_init__(self) -> None:
        check_head_sizes(self.d_model, self.n_heads, self.n_kv_heads, self.dropout)
        for name in ("vocab_size", "block_size", "n_layers", "mlp_ratio"):
            check_whole(name, getattr(self, name))
        for name in ("bias", "tie_weights"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be true or false")

    @property
    def head_dim(self) -> int:
        """Each head's width: d_model split evenly across the query heads (the lessons' d_k)."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        """Flat, as configs/model writes it (the place fields beside the others): a checkpoint's ``model``."""
        lesson = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("places", "attention")}
        return lesson | {k: v for part in (self.places, self.attention) if part for k, v in part.to_dict().items()}


class MLP(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        hidden = cfg.mlp_ratio * cfg.d_model
        self.fc_in = nn.Linear(cfg.d_model, hidden, bias=cfg.bias)
        self.fc_out = nn.Linear(hidden, cfg.d_model, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.fc_out(F.gelu(self.fc_in(x))))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.ln_attn = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        attention = cfg.attention.block if cfg.attention else MultiHeadAttention  # a learner's: model/own_block.py
        self.attn = attention(cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.dropout, cfg.bias)
        self.ln_mlp = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.mlp = MLP(cfg)
        self.hook_resid_pre = HookPoint()  # the residual stream entering the block, (B, T, d_model)

    def forward(self, x, need_weights=False, cache=None, keep_from: int = 0, scores=None):
        """x (B, T, d_model) -> (B, T - keep_from, d_model): every position attends, but only positions
        keep_from.. go on through the MLP (the others served as keys and values; nothing reads them later).
        scores: what a position scheme adds to the attention (``MultiHeadAttention.forward``), or None."""
        x = self.hook_resid_pre(x)
        h = self.ln_attn(x)
        attn_out, weights = self.attn(h, need_weights=need_weights, cache=cache, scores=scores)
        x = (x + attn_out)[:, keep_from:]
        x = x + self.mlp(self.ln_mlp(x))
        return x, weights


class Transformer(nn.Module):
    """The network. ``places``: a position scheme (model/positions.py: ``PlaceScheme``) built for ``cfg.places``;
    None, as in the lesson: a learned vector per position, ``pos_emb``."""

    def __init__(self, cfg: TransformerConfig, places: nn.Module | None = None):
        super().__init__()
        if (cfg.places is None) != (places is None):
            raise ValueError("cfg.places and the scheme built for it come together: see model/build.py")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        keep = places is None or places.positions  # a scheme may do without learned positions
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.d_model) if keep else None  # (block_size, d_model)
        self.places = places
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.hook_resid_final = HookPoint()  # the residual stream entering ln_f, (B, T, d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.tok_emb.weight
        self.apply(self._init_weights)
        if places is not None:
            places.after_init()  # a scheme's weights that start otherwise (place scores: at zero)
            self.register_load_state_dict_pre_hook(places.rename_old_keys)  # checkpoints of older code
        for block in self.blocks:  # GPT-2's trick: the residual-writing projections shrink with depth
            for p in (block.attn.W_o.weight, block.mlp.fc_out.weight):
                nn.init.normal_(p, mean=0.0, std=0.02 / (2 * cfg.n_layers) ** 0.5)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(
        self, idx: torch.Tensor, need_weights=False, caches: list[KVCache] | None = None, logits_from=0, places=None
    ) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        """idx (B, T) token ids -> logits (B, T - logits_from, vocab_size), and each layer's weights when asked.
        Heads are ablated or patched through the hook points (``model/hooks.py``), never through arguments.
        caches: one :class:`KVCache` per layer for incremental decoding (idx then holds new tokens only).
        logits_from: the first position whose next-token logits are wanted. Training only needs the answer's;
            the last layer then skips the MLP on earlier positions (~18% of a default step).
        places: with the place embedding, each position's place id, (T_total,) or (B, T_total) from position 0
            (with caches, the whole sequence's); None = the trained layout's (``place_ids``)."""
        if caches and logits_from:
            raise ValueError("logits_from is for whole sequences; with caches idx holds only the new tokens")
        x = self.embed(idx, start=caches[0].length if caches else 0, places=places)
        x, weights = self.run_blocks(x, need_weights=need_weights, caches=caches, keep_from=logits_from, places=places)
        return self.unembed(x), weights

    def embed(self, idx: torch.Tensor, start: int = 0, places: torch.Tensor | None = None) -> torch.Tensor:
        """Token ids (B, T) at positions start.. -> the residual stream (B, T, d_model); places: as in ``forward``."""
        T = idx.shape[1]
        if self.has_table and start + T > self.cfg.block_size:
            raise ValueError(f"sequence of {start + T} tokens is longer than block_size={self.cfg.block_size}")
        return self.drop(self.tok_emb(idx) + self.positions(start, T, places))

    def positions(self, start: int, T: int, places: torch.Tensor | None = None) -> torch.Tensor:
        """What positions start..start+T-1 add to their tokens' embeddings: (T, d_model) learned vectors, or what
        the position scheme adds (places: as in ``forward``)."""
        if self.places is None:
            return self.pos_emb.weight[start : start + T]
        return self.places.added(start, T, places, self.pos_emb)

    @property
    def has_table(self) -> bool:
        """Whether a table of positions bounds the sequences the model can read (block_size): always for learned
        positions; a scheme whose places only score the attention has none."""
        return self.places is None or self.places.has_table

    def run_blocks(self, x: torch.Tensor, start_layer=0, need_weights=False, caches=None, keep_from=0, places=None):
        """The residual stream (B, T, d_model) through blocks[start_layer:] -> (stream, weights or None). The stream
        returned holds positions keep_from.. only: the last block skips the others; ``places``: as in ``forward``."""
        all_weights = [] if need_weights else None
        last = len(self.blocks) - 1
        T_k = (caches[0].length if caches else 0) + x.shape[1]  # the keys each query may see, cached ones included
        scores = self.places.attention(x.shape[1], T_k, places, x.device) if self.places else [None] * (last + 1)
        for i in range(start_layer, len(self.blocks)):
            cache = None if caches is None else caches[i]
            x, weights = self.blocks[i](x, need_weights, cache, keep_from if i == last else 0, scores[i])
            if need_weights:
                all_weights.append(weights)
        return x, all_weights

    def unembed(self, x: torch.Tensor) -> torch.Tensor:
        """Residual stream (B, T, d_model) -> next-token logits (B, T, vocab_size)."""
        return self.lm_head(self.ln_f(self.hook_resid_final(x)))

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, n_new: int, use_cache=True, places=None, chunk=None) -> torch.Tensor:
        """Greedy decoding. prompt (B, T) -> the n_new tokens that follow it, (B, n_new); ``places`` (as in
        ``forward``) cover the prompt and the new tokens. With ``use_cache`` every layer keeps its keys/values,
        so each new token costs one position of compute instead of re-running the whole sequence; ``chunk``:
        the prompt goes into the cache this many tokens at a time (a long prompt's scores: chunk x T, not T x T)."""
        caches = [KVCache() for _ in self.blocks] if use_cache else None
        for start in range(0, prompt.shape[1] - 1, chunk) if use_cache and chunk else ():
            self(prompt[:, start : min(start + chunk, prompt.shape[1] - 1)], caches=caches, places=places)
        seq = prompt
        for _ in range(n_new):
            new = seq[:, caches[0].length :] if use_cache else seq  # a cache has seen the rest
            logits, _ = self(new, caches=caches, places=places)
            seq = torch.cat([seq, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)  # the likeliest next token
        return seq[:, prompt.shape[1] :]
