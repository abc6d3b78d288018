"""A small decoder-only (GPT-style) transformer built around :class:`MultiHeadAttention`.

token + learned position (+ optional digit-place) embeddings -> n_layers x [pre-LN attention, pre-LN MLP]
-> LayerNorm -> LM head.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F

from model.attention import KVCache, MultiHeadAttention, check_head_sizes, check_log_scale, check_size

PLACE_SCHEMES = ("predicted", "own")  # TransformerConfig.place_of


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
    # Abacus-style: every token also gets an embedding of the digit place it reads or predicts (units, tens,
    # ...), shared by both operands and the answer, so "line up the same place" is one rule to learn.
    place_embedding: bool = False
    # false: no learned absolute positions, only the place embedding (position coupling, Cho et al. 2024):
    # the same place can then only be found by its place, and '+' and '*' do not need to tell a from b.
    position_embedding: bool = True
    # Places beyond the trained width (length generalisation): the place embedding gets place_offset more
    # places, and training shifts every digit's place by a random 0..place_offset (CalculatorModule), so the
    # model has learned every place of problems up to place_offset digits longer than it was trained on.
    place_offset: int = 0
    # Which place a token carries: "predicted" -- an answer token carries the place of the digit it predicts, so
    # the query writing the tens and both operands' tens share an id (position coupling, Cho et al. 2024) --
    # or "own" -- every digit carries its own place (abacus embeddings, McLeish et al. 2024).
    place_of: str = "predicted"
    # Randomised places (Ruoss et al. 2023): this share of training sequences gets, instead of a contiguous run
    # of places shifted by a random offset, a sorted random draw of distinct places from all the model has, so
    # digits far apart in place -- as in a problem longer than any trained on -- have been seen side by side.
    random_places: float = 0.0
    # Relative place scores (with place_embedding): > 0 adds to every attention score a learned bias of its layer
    # and head by the place difference between query and key -- one per difference from -place_bias to
    # place_bias, one shared by every farther key below and one by every farther key above, one for a token with
    # no place --, so a key further away than any in training scores as the trained far ones did (T5-style).
    place_bias: int = 0
    # Place window (with place_bias): true hides every key more than place_bias places from its query instead of
    # giving it the shared "farther" score, and every digit from the tokens with no place ('+', '='), which stay
    # visible to all: what any token computes then depends on the digits within a few places of its own only, the
    # same at every length -- local attention by place, like a written sum's column and its neighbours.
    place_window: bool = False
    # Length-scaled attention: 0, or a base b; every query's scores are multiplied by log(n + 1) / log(b), n the
    # keys it sees (scalable softmax), so a query over a problem longer than any trained on is as sharp.
    log_scale: int = 0

    def __post_init__(self) -> None:
        check_head_sizes(self.d_model, self.n_heads, self.n_kv_heads, self.dropout)
        for name in ("vocab_size", "block_size", "n_layers", "mlp_ratio"):
            check_size(name, getattr(self, name))
        for name in ("bias", "tie_weights", "place_embedding", "position_embedding", "place_window"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be true or false")
        if not isinstance(self.place_offset, int) or isinstance(self.place_offset, bool) or self.place_offset < 0:
            raise ValueError(f"place_offset={self.place_offset!r}: must be a whole number >= 0")
        if self.place_of not in PLACE_SCHEMES:
            raise ValueError(f"place_of={self.place_of!r}: must be one of {', '.join(PLACE_SCHEMES)}")
        if not isinstance(self.place_bias, int) or isinstance(self.place_bias, bool) or self.place_bias < 0:
            raise ValueError(f"place_bias={self.place_bias!r}: must be a whole number >= 0")
        if self.place_bias and not self.place_embedding:
            raise ValueError("place_bias > 0 needs place_embedding=true (a position scheme with places)")
        if self.place_window and not self.place_bias:
            raise ValueError("place_window=true needs place_bias > 0: the window's half-width in places")
        check_log_scale(self.log_scale)
        share = self.random_places
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
            raise ValueError(f"random_places={share!r}: must be a share from 0 to 1")
        if not (self.position_embedding or self.place_embedding):
            raise ValueError("position_embedding=false: needs place_embedding=true, or the model has no positions")

    @property
    def head_dim(self) -> int:
        """Each head's width: d_model split evenly across the query heads (the lessons' d_k)."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)


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
        self.attn = MultiHeadAttention(
            cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.dropout, cfg.bias, log_scale=cfg.log_scale
        )
        self.ln_mlp = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.mlp = MLP(cfg)
        self.hook_resid_pre = nn.Identity()  # the residual stream entering the block, (B, T, d_model)

    def forward(self, x, need_weights=False, cache=None, keep_from: int = 0, bias=None):
        """x (B, T, d_model) -> (B, T - keep_from, d_model): every position attends, but only positions
        keep_from.. go on through the MLP (the others served as keys and values; nothing reads them later).
        bias: scores added to the attention's (see ``MultiHeadAttention.forward``)."""
        x = self.hook_resid_pre(x)
        attn_out, weights = self.attn(self.ln_attn(x), need_weights=need_weights, cache=cache, bias=bias)
        x = (x + attn_out)[:, keep_from:]
        x = x + self.mlp(self.ln_mlp(x))
        return x, weights


class Transformer(nn.Module):
    """place_ids: with ``cfg.place_embedding``, the digit place of each position of the trained layout (0 = no
    digit), given by the problem format (:func:`data.positions.place_ids`): what ``forward`` uses when it is given
    no ``places``. Other layouts (longer problems, shifted places) pass their own ``places``."""

    def __init__(self, cfg: TransformerConfig, place_ids: list[int] | None = None):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.position_embedding:
            self.pos_emb = nn.Embedding(cfg.block_size, cfg.d_model)
        if cfg.place_embedding:
            if place_ids is None or not 0 < len(place_ids) <= cfg.block_size:
                raise ValueError(f"place_embedding=true needs the digit place of every position (<= {cfg.block_size})")
            self.register_buffer("place_ids", torch.tensor(place_ids), persistent=False)  # (trained seq_len,)
            self.place_emb = nn.Embedding(max(place_ids) + 1 + cfg.place_offset, cfg.d_model)
        if cfg.place_bias:  # (place-difference buckets, one bias per layer and head), from no bias at all
            self.place_scores = nn.Embedding(2 * cfg.place_bias + 4, cfg.n_layers * cfg.n_heads)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.hook_resid_final = nn.Identity()  # the residual stream entering ln_f, (B, T, d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.tok_emb.weight
        self.apply(self._init_weights)
        if cfg.place_bias:
            nn.init.zeros_(self.place_scores.weight)
        # GPT-2's trick: scale the residual-writing projections down with depth.
        for name, p in self.named_parameters():
            if name.endswith(("attn.W_o.weight", "mlp.fc_out.weight")):
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
        self,
        idx: torch.Tensor,
        need_weights: bool = False,
        caches: list[KVCache] | None = None,
        logits_from: int = 0,
        places: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        """idx (B, T) token ids -> logits (B, T - logits_from, vocab_size), and each layer's weights when asked.

        Heads are ablated or patched through the hook points (``model/hooks.py``), never through arguments.
        caches: one :class:`KVCache` per layer for incremental decoding (idx then holds new tokens only).
        logits_from: the first position whose next-token logits are wanted. Training only needs the
            answer's; the last layer then skips the MLP on earlier positions (~18% of a default step).
        places: with the place embedding, each position's place id, (T_total,) or (B, T_total) from position 0
            (with caches, the whole sequence's); None = the trained layout's (``place_ids``).
        """
        if caches and logits_from:
            raise ValueError("logits_from is for whole sequences; with caches idx holds only the new tokens")
        x = self.embed(idx, start=caches[0].length if caches else 0, places=places)
        x, weights = self.run_blocks(x, need_weights=need_weights, caches=caches, keep_from=logits_from, places=places)
        return self.unembed(x), weights

    def embed(self, idx: torch.Tensor, start: int = 0, places: torch.Tensor | None = None) -> torch.Tensor:
        """Token ids (B, T) at positions start.. -> the residual stream (B, T, d_model); places: as in ``forward``."""
        T = idx.shape[1]
        if start + T > self.cfg.block_size:
            raise ValueError(f"sequence of {start + T} tokens is longer than block_size={self.cfg.block_size}")
        ids = self.places_to(start + T, places)[..., start:] if self.cfg.place_embedding else None
        return self.drop(self.tok_emb(idx) + self.added_positions(start, T, ids))

    def added_positions(self, start: int, T: int, places: torch.Tensor | None) -> torch.Tensor:
        """What positions start..start+T add to their tokens' embeddings, (T, d_model) or (B, T, d_model): the
        learned position embedding, the place embedding of ``places`` (T,) or (B, T), or their sum."""
        parts = [self.pos_emb.weight[start : start + T]] if self.cfg.position_embedding else []
        parts += [self.place_emb(places)] if self.cfg.place_embedding else []
        return sum(parts[1:], parts[0])

    @property
    def trained_len(self) -> int:
        """Positions of the layout ``position_table`` covers: the trained one with places, else block_size."""
        return len(self.place_ids) if self.cfg.place_embedding else self.cfg.block_size

    def position_table(self) -> torch.Tensor:
        """What each position of the trained layout adds to its token's embedding, (trained_len, d_model): one
        table, as a fixed layout makes it (the Hugging Face export and TransformerLens fold it in)."""
        return self.added_positions(0, self.trained_len, self.place_ids if self.cfg.place_embedding else None)

    def run_blocks(
        self,
        x: torch.Tensor,
        start_layer: int = 0,
        need_weights: bool = False,
        caches: list[KVCache] | None = None,
        keep_from: int = 0,
        places: torch.Tensor | None = None,
    ):
        """The residual stream (B, T, d_model) through blocks[start_layer:] -> (stream, weights or None).

        The returned stream holds positions keep_from.. only: the last block skips the others (see ``forward``);
        ``places`` as in ``forward`` (for the place scores of ``cfg.place_bias``)."""
        all_weights = [] if need_weights else None
        last = len(self.blocks) - 1
        T_k = (caches[0].length if caches else 0) + x.shape[1]  # the keys each query may see, cached ones included
        scores = self.place_score_table(x.shape[1], T_k, places)
        for i in range(start_layer, len(self.blocks)):
            x, weights = self.blocks[i](
                x,
                need_weights=need_weights,
                cache=None if caches is None else caches[i],
                keep_from=keep_from if i == last else 0,
                bias=None if scores is None else scores[i],
            )
            if need_weights:
                all_weights.append(weights)
        return x, all_weights

    def places_to(self, end: int, places: torch.Tensor | None) -> torch.Tensor:
        """The place ids of positions 0 .. end - 1, (end,) or (B, end): ``places`` as in ``forward``, or the trained
        layout's when None (a ValueError for a longer sequence, whose places only the caller knows)."""
        if places is None and end > self.trained_len:
            raise ValueError(f"a sequence of {end} tokens is longer than the trained layout: give its places")
        return (self.place_ids if places is None else places)[..., :end]

    def place_score_table(self, T_q: int, T_k: int, places: torch.Tensor | None) -> torch.Tensor | None:
        """The place scores of ``cfg.place_bias`` for queries at positions T_k - T_q .. T_k - 1 against keys 0 ..
        T_k - 1, per layer: (n_layers, B or 1, n_heads, T_q, T_k); None without them. ``places``: as in
        ``forward`` (None: the trained layout's)."""
        K = self.cfg.place_bias
        if not K:
            return None
        places = self.places_to(T_k, places)
        if places.dim() == 1:
            places = places.unsqueeze(0)  # (1, T_k): the same for every sequence
        query, key = places[:, T_k - T_q :, None], places[:, None, :]  # (B, T_q, 1), (B, 1, T_k)
        bucket = (query - key).clamp(-K - 1, K + 1) + K + 1  # 0 .. 2K + 2: farther below, -K .. K, farther above
        bucket = bucket.masked_fill((query == 0) | (key == 0), 2 * K + 3)  # a token with no place
        table = self.place_scores(bucket)  # (B, T_q, T_k, n_layers * n_heads)
        if self.cfg.place_window:  # hidden: keys more than K places away, and every digit from a token with no place
            far = (key > 0) & ((query == 0) | ((query - key).abs() > K))  # a query always sees itself
            table = table.masked_fill(far.unsqueeze(-1), float("-inf"))
        B, L, H = len(places), self.cfg.n_layers, self.cfg.n_heads
        return table.view(B, T_q, T_k, L, H).permute(3, 0, 4, 1, 2)

    def unembed(self, x: torch.Tensor) -> torch.Tensor:
        """Residual stream (B, T, d_model) -> next-token logits (B, T, vocab_size)."""
        return self.lm_head(self.ln_f(self.hook_resid_final(x)))

    @torch.no_grad()
    def generate(
        self, prompt: torch.Tensor, n_new: int, use_cache: bool = True, places: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Greedy decoding. prompt (B, T) -> the n_new tokens that follow it, (B, n_new); ``places`` (as in
        ``forward``) cover the prompt and the new tokens.

        With ``use_cache`` every layer keeps its keys/values, so each new token costs one position
        of compute instead of re-running the whole sequence.
        """
        caches = [KVCache() for _ in self.blocks] if use_cache else None
        seq, step_input, new = prompt, prompt, []
        for _ in range(n_new):
            logits, _ = self(step_input if use_cache else seq, caches=caches, places=places)
            next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            new.append(next_token)
            step_input = next_token
            if not use_cache:
                seq = torch.cat([seq, next_token], dim=1)
        return torch.cat(new, dim=1)
