"""Position schemes: how the model knows where each token is, and which keys a query may see.

The lesson's scheme is GPT-2's: a learned vector per position (``pos_emb``), added to the token's embedding. The
length-generalisation research adds the others, each switched on by a :class:`~model.transformer.TransformerConfig`
field:

  place_embedding     every token also gets a vector for the digit place it reads or predicts (units, tens, ...;
                      ``place_emb``), shared by both operands and the answer, so "line up the same place" is one
                      rule to learn. Which place a token carries (``place_of``): "predicted" -- an answer token
                      carries the place of the digit it predicts, so the query writing the tens and both operands'
                      tens share an id (position coupling, Cho et al. 2024) -- or "own" -- every digit its own
                      place (abacus embeddings, McLeish et al. 2024). The places come from the problem format
                      (:func:`data.positions.place_ids`).
  position_embedding  false: no learned absolute positions, only places (coupling): the same place can then only
                      be found by its place, and '+' and '*' do not need to tell a from b.
  place_vectors       false (with place_bias): no vector per place is added to the tokens; places only score and
                      window the attention (below), which sees place *differences* alone. The model then has no
                      table of places: nothing in it knows how long a problem is, so no length is its last one.
  place_offset        places beyond the trained width: ``place_emb`` gets place_offset more places, and training
                      shifts every digit's place by a random 0..place_offset (``CalculatorModule``), so the model has
                      learned every place of problems up to place_offset digits longer than it was trained on.
  random_places       this share of training sequences gets, instead of a contiguous run of places shifted by a
                      random offset, a sorted random draw of distinct places from all the model has (Ruoss et al.
                      2023), so digits far apart in place -- as in a longer problem -- have been seen side by side.
  place_bias = K      relative place scores (T5-style): every attention score gets a learned bias of its layer and
                      head by the place difference between query and key (``place_scores``) -- one per difference
                      -K..K, one shared by every farther key below and one by every farther key above, one for a
                      token with no place --, so a key further away than any in training scores as the trained far
                      ones did.
  place_window        (with place_bias) hides every key more than K places from its query instead of giving it the
                      shared "farther" score, and every digit from the tokens with no place ('+', '='), which stay
                      visible to all: what a token computes depends on the digits within K places of its own only,
                      the same at every length -- like a written sum's column and its neighbours.
  log_scale = b       0, or a base b: every query's scores are multiplied by log(n + 1) / log(b), n the keys it sees
                      (scalable softmax), so a query over a problem longer than any trained on is as sharp.

The parameters live on the Transformer itself (``pos_emb``, ``place_emb``, ``place_scores``: a checkpoint's keys);
:class:`Positions`, the Transformer's base class, builds them and hands the rest of the model what it needs: the
vectors added to the token embeddings, and for the attention a score bias per layer (-inf = hidden) and a query
scale. ``MultiHeadAttention`` knows nothing of places.
"""

from __future__ import annotations

import math

import torch
from torch import nn

PLACE_SCHEMES = ("predicted", "own")  # TransformerConfig.place_of


def is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_positions(cfg) -> None:
    """The position fields' rules for a ``TransformerConfig``, as ValueErrors that name the config key."""
    for name in ("place_embedding", "place_vectors", "position_embedding", "place_window"):
        if not isinstance(getattr(cfg, name), bool):
            raise ValueError(f"{name}={getattr(cfg, name)!r}: must be true or false")
    if not is_whole(cfg.place_offset) or cfg.place_offset < 0:
        raise ValueError(f"place_offset={cfg.place_offset!r}: must be a whole number >= 0")
    if cfg.place_of not in PLACE_SCHEMES:
        raise ValueError(f"place_of={cfg.place_of!r}: must be one of {', '.join(PLACE_SCHEMES)}")
    if not is_whole(cfg.place_bias) or cfg.place_bias < 0:
        raise ValueError(f"place_bias={cfg.place_bias!r}: must be a whole number >= 0")
    if cfg.place_bias and not cfg.place_embedding:
        raise ValueError("place_bias > 0 needs place_embedding=true (a position scheme with places)")
    if not cfg.place_vectors and not cfg.place_bias:
        raise ValueError("place_vectors=false needs place_bias > 0: places must then score the attention")
    if cfg.place_window and not cfg.place_bias:
        raise ValueError("place_window=true needs place_bias > 0: the window's half-width in places")
    if not is_whole(cfg.log_scale) or cfg.log_scale < 0 or cfg.log_scale == 1:
        raise ValueError(f"log_scale={cfg.log_scale!r}: must be 0 (off) or a whole number >= 2")
    share = cfg.random_places
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
        raise ValueError(f"random_places={share!r}: must be a share from 0 to 1")
    if not (cfg.position_embedding or cfg.place_embedding):
        raise ValueError("position_embedding=false: needs place_embedding=true, or the model has no positions")


def query_scale(T_q: int, T_k: int, log_scale: int, device: torch.device | None = None) -> torch.Tensor:
    """log_scale's factor for causal queries at positions T_k - T_q .. T_k - 1 (a cache holds the earlier keys):
    query t sees n = T_k - T_q + t + 1 keys and its scores are multiplied by log(n + 1) / log(b), (T_q, 1)."""
    seen = torch.arange(T_k - T_q, T_k, device=device) + 1
    return ((seen + 1).log() / math.log(log_scale))[:, None]


class Positions(nn.Module):
    """The Transformer's base class: its position parameters, and what they add to the tokens and to the scores.

    ``place_ids`` (with ``cfg.place_embedding``): the digit place of each position of the trained layout (0 = no
    digit), kept as a buffer: what is used when ``places`` is None. Other layouts (longer problems, shifted
    places) pass their own ``places``, (T_total,) or (B, T_total) from position 0."""

    def add_position_parameters(self, place_ids: list[int] | None) -> None:
        """Register the parameters ``self.cfg`` asks for: pos_emb (block_size, d_model); place_emb (places,
        d_model) and the place_ids buffer; place_scores (score buckets, n_layers * n_heads)."""
        cfg = self.cfg
        if cfg.position_embedding:
            self.pos_emb = nn.Embedding(cfg.block_size, cfg.d_model)
        if cfg.place_embedding:
            if place_ids is None or not 0 < len(place_ids) <= cfg.block_size:
                raise ValueError(f"place_embedding=true needs the digit place of every position (<= {cfg.block_size})")
            self.register_buffer("place_ids", torch.tensor(place_ids), persistent=False)  # (trained seq_len,)
        if cfg.place_embedding and cfg.place_vectors:
            self.place_emb = nn.Embedding(max(place_ids) + 1 + cfg.place_offset, cfg.d_model)
        if cfg.place_bias:  # (place-difference buckets, one bias per layer and head)
            self.place_scores = nn.Embedding(2 * cfg.place_bias + 4, cfg.n_layers * cfg.n_heads)

    def init_position_weights(self) -> None:
        """After the model's own initialisation: the place scores start at zero (no bias at all)."""
        if self.cfg.place_bias:
            nn.init.zeros_(self.place_scores.weight)

    @property
    def has_table(self) -> bool:
        """Whether a table of absolute positions or places bounds the problems the model can address: false for
        places that only score the attention (``place_vectors=false``) without learned positions."""
        return self.cfg.position_embedding or (self.cfg.place_embedding and self.cfg.place_vectors)

    @property
    def trained_len(self) -> int:
        """Positions of the layout ``position_table`` covers: the trained one with places, else block_size."""
        return len(self.place_ids) if self.cfg.place_embedding else self.cfg.block_size

    def places_to(self, end: int, places: torch.Tensor | None) -> torch.Tensor:
        """The place ids of positions 0 .. end - 1, (end,) or (B, end): ``places``, or the trained layout's when
        None (a ValueError for a longer sequence, whose places only the caller knows)."""
        if places is None and end > self.trained_len:
            raise ValueError(f"a sequence of {end} tokens is longer than the trained layout: give its places")
        return (self.place_ids if places is None else places)[..., :end]

    def added_positions(self, start: int, T: int, places: torch.Tensor | None = None) -> torch.Tensor:
        """What positions start..start+T-1 add to their tokens' embeddings, (T, d_model) or (B, T, d_model): the
        learned position embedding, the place embedding of their places, or the sum of both."""
        parts = [self.pos_emb.weight[start : start + T]] if self.cfg.position_embedding else []
        if self.cfg.place_embedding and self.cfg.place_vectors:
            parts.append(self.place_emb(self.places_to(start + T, places)[..., start:]))
        if not parts:  # places that only score the attention: nothing added
            return torch.zeros(T, self.cfg.d_model, device=self.place_scores.weight.device)
        return sum(parts[1:], parts[0])

    def position_table(self) -> torch.Tensor:
        """What each position of the trained layout adds to its token's embedding, (trained_len, d_model): one
        table, as a fixed layout makes it (the Hugging Face export and TransformerLens fold it in)."""
        return self.added_positions(0, self.trained_len)

    def attention_terms(
        self, T_q: int, T_k: int, places: torch.Tensor | None, device: torch.device
    ) -> tuple[list[torch.Tensor | None], torch.Tensor | None]:
        """What the position schemes add to causal attention for queries at positions T_k - T_q .. T_k - 1: per
        layer a score bias, (B or 1, n_heads, T_q, T_k) with -inf where a key is hidden, or None; and the query
        scale of log_scale, (T_q, 1), or None."""
        table = self.place_score_table(T_q, T_k, places)
        biases = [None] * self.cfg.n_layers if table is None else list(table)
        return biases, query_scale(T_q, T_k, self.cfg.log_scale, device) if self.cfg.log_scale else None

    def place_score_table(self, T_q: int, T_k: int, places: torch.Tensor | None) -> torch.Tensor | None:
        """The place scores of ``cfg.place_bias`` for queries at positions T_k - T_q .. T_k - 1 against keys 0 ..
        T_k - 1, per layer: (n_layers, B or 1, n_heads, T_q, T_k), -inf outside the place window; None without
        them."""
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
