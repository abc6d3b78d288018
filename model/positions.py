"""Position schemes: how the model knows where each token is, and which keys a query may see.

The lesson's scheme is GPT-2's: a learned vector per position (``pos_emb``), added to the token's embedding. The
length-generalisation research adds the others, each switched on by a :class:`~model.transformer.TransformerConfig`
field:

  place_embedding     every token also gets a vector for the digit place it reads or predicts (units, tens, ...;
                      ``place_emb``), shared by both operands and the answer, so "line up the same place" is one
                      rule to learn. Which place a token carries (``place_of``): "predicted" -- an answer token
                      carries the place of the digit it predicts, so the query writing the tens and both operands'
                      tens share an id (position coupling, Cho et al. 2024) -- "own" -- every digit its own
                      place (abacus embeddings, McLeish et al. 2024) -- or "anchored" -- as "predicted", with b's
                      digits anchored: its lowest ANCHORS seen from every column, each scored by its own place
                      (with place_bias), the rest hidden, so a short multiplier reaches every column of a long
                      product and nothing grows with the width -- or "lined" -- as "predicted", for a working
                      written in lines (a running product, a running sum): each token also carries its line, and a
                      query on a line sees, of the tokens on lines, its own line's and the line before's only, each
                      scored as such (a token on line -i, a sum's operand, is seen from line i alone);
                      b's digits are placeless, each on the line it multiplies, so however many lines b's length
                      makes, a line reads the one before it and its own digit of b -- or "stepped" -- as
                      "anchored", for long division's steps: each token also gets a learned vector of what it is
                      (a digit of a, a step's quotient digit or its j-th remainder digit, the answer's quotient or
                      remainder: ``role_emb``), so a query tells the running remainder from the digit of a it
                      brings down, which share a place; the roles are the same at every length. The places come
                      from the problem format (:func:`data.positions.place_ids`).
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

These fields are one :class:`PlaceConfig` (``TransformerConfig.places``; None: the lesson's learned positions),
and :class:`PlaceScheme` is what the Transformer calls at its named points when one is given: what positions add
to the tokens (``added``) and, per layer, a :class:`ScoreTerms` for the attention (``attention``): a score bias
(-inf = hidden) and a query scale. ``MultiHeadAttention`` knows nothing of places; the Transformer knows only that a
scheme may be there. The network is put together in ``model/build.py``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
from torch import nn

from data.checks import check_whole, is_whole
from data.positions import (
    ANCHORED,
    LINE_STRIDE,
    ROLES,
    split_roles,
    training_places,
    written_in_lines,
    written_in_steps,
)
from data.positions import place_ids as places_of
from data.positions import role_ids as roles_of
from data.problems import ProblemFormat

PLACE_SCHEMES = ("predicted", "own", "anchored", "lined", "stepped")  # PlaceConfig.place_of
LINE_BUCKETS = 3  # "lined": a key's line against the query's -- not both on a line, the same line, the line before
ANCHORS = 4  # anchored places seen from every column, each with a score of its own (b's units .. thousands); b's
# higher places are hidden from every query: their zeros would otherwise grow in number with the problem's width


@dataclass(frozen=True)
class PlaceConfig:
    """The length research's position fields (flat ``model.*`` keys in configs/model and configs/position), each
    explained above; the defaults are GPT-2's learned positions only, which the lesson's Transformer has itself."""

    place_embedding: bool = False
    place_vectors: bool = True
    position_embedding: bool = True
    place_offset: int = 0
    place_of: str = "predicted"
    random_places: float = 0.0
    place_bias: int = 0
    place_window: bool = False
    log_scale: int = 0

    def __post_init__(self) -> None:
        """The fields' rules, as ValueErrors that name the config key."""
        for name in ("place_embedding", "place_vectors", "position_embedding", "place_window"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be true or false")
        check_whole("place_offset", self.place_offset, least=0)
        if self.place_of not in PLACE_SCHEMES:
            raise ValueError(f"place_of={self.place_of!r}: must be one of {', '.join(PLACE_SCHEMES)}")
        check_whole("place_bias", self.place_bias, least=0)
        if self.place_bias and not self.place_embedding:
            raise ValueError("place_bias > 0 needs place_embedding=true (a position scheme with places)")
        if not self.place_vectors and not self.place_bias:
            raise ValueError("place_vectors=false needs place_bias > 0: places must then score the attention")
        if self.place_of in ("anchored", "lined", "stepped") and self.place_vectors:
            raise ValueError(f"place_of={self.place_of} needs place_vectors=false: its places only score the attention")
        if self.place_window and not self.place_bias:
            raise ValueError("place_window=true needs place_bias > 0: the window's half-width in places")
        if not is_whole(self.log_scale) or self.log_scale < 0 or self.log_scale == 1:
            raise ValueError(f"log_scale={self.log_scale!r}: must be 0 (off) or a whole number >= 2")
        share = self.random_places
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
            raise ValueError(f"random_places={share!r}: must be a share from 0 to 1")
        if not (self.position_embedding or self.place_embedding):
            raise ValueError("position_embedding=false: needs place_embedding=true, or the model has no positions")

    def to_dict(self) -> dict:
        return asdict(self)


PLACE_FIELDS = tuple(f.name for f in fields(PlaceConfig))


def query_scale(T_q: int, T_k: int, log_scale: int, device: torch.device | None = None) -> torch.Tensor:
    """log_scale's factor for causal queries at positions T_k - T_q .. T_k - 1 (a cache holds the earlier keys):
    query t sees n = T_k - T_q + t + 1 keys and its scores are multiplied by log(n + 1) / log(b), (T_q, 1)."""
    seen = torch.arange(T_k - T_q, T_k, device=device) + 1
    return ((seen + 1).log() / math.log(log_scale))[:, None]


@dataclass
class ScoreTerms:
    """What a scheme adds to one layer's attention, handed to ``MultiHeadAttention.forward`` as ``scores``: called
    on the queries (B, n_heads, T_q, head_dim), it returns them times ``scale`` (T_q, 1) and the score ``bias``,
    broadcastable to (B, n_heads, T_q, T_k), -inf where a key is hidden; either may be None."""

    bias: torch.Tensor | None = None
    scale: torch.Tensor | None = None

    def __call__(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return (q if self.scale is None else q * self.scale.to(q.dtype)), self.bias


class PlaceScheme(nn.Module):
    """A Transformer's place parameters, and what they add to the tokens and to the scores.

    ``place_ids``: the digit place of each position of the trained layout (0 = no digit), kept as a buffer: what
    is used when ``places`` is None. Other layouts (longer problems, shifted places) pass their own ``places``,
    (T_total,) or (B, T_total) from position 0."""

    def __init__(self, cfg: PlaceConfig, model, fmt: ProblemFormat):
        """``model``: the TransformerConfig whose sizes the parameters take; ``fmt``: the trained layout, whose
        positions' places ``place_ids`` holds. Registers place_emb (places, d_model) and the place_ids buffer;
        place_scores (score buckets, n_layers * n_heads): those cfg asks for."""
        super().__init__()
        place_ids = places_of(fmt, cfg.place_of)
        if cfg.place_of == "lined" and not written_in_lines(fmt):
            raise ValueError(
                "place_of=lined needs a working written in lines (data.show_work=true with data.running_product=true, "
                "or data.operands > 2)"
            )
        if cfg.place_of == "stepped" and not written_in_steps(fmt):
            raise ValueError(
                "place_of=stepped needs long division's steps with a short divisor (data.operators='/', "
                "data.show_work=true and data.b_digits > 0)"
            )
        self.cfg, self.n_layers, self.n_heads = cfg, model.n_layers, model.n_heads
        if cfg.place_embedding:
            if place_ids is None or not 0 < len(place_ids) <= model.block_size:
                raise ValueError(
                    f"place_embedding=true needs the digit place of every position (<= {model.block_size})"
                )
            self.register_buffer("place_ids", torch.tensor(place_ids), persistent=False)  # (trained seq_len,)
        if cfg.place_embedding and cfg.place_vectors:
            self.place_emb = nn.Embedding(max(place_ids) + 1 + cfg.place_offset, model.d_model)
        if cfg.place_bias:  # (place-difference buckets and any anchored places', one bias per layer and head; with
            # lines, those for each of LINE_BUCKETS)
            anchors = ANCHORS if cfg.place_of in ANCHORED else 0
            lines = LINE_BUCKETS if cfg.place_of == "lined" else 1
            self.place_scores = nn.Embedding((2 * cfg.place_bias + 4 + anchors) * lines, model.n_layers * model.n_heads)
        if cfg.place_of == "stepped":  # a vector per role: a's digit, b's, a step's j-th digit, the answer's ...
            self.role_emb = nn.Embedding(max(max(roles_of(fmt)) + 1, len(ROLES)), model.d_model)
        self.d_model, self.block_size = model.d_model, model.block_size

    def after_init(self) -> None:
        """After the model's own initialisation: the place scores start at zero (no bias at all)."""
        if self.cfg.place_bias:
            nn.init.zeros_(self.place_scores.weight)

    @staticmethod
    def rename_old_keys(module, state_dict, prefix, *args) -> None:
        """Checkpoints saved while the place parameters sat on the Transformer itself: their keys, renamed as
        they load (a load_state_dict pre-hook of the Transformer)."""
        for old in OLD_KEYS:
            if prefix + old in state_dict:
                state_dict[prefix + "places." + old] = state_dict.pop(prefix + old)

    @property
    def positions(self) -> bool:
        """Whether the Transformer keeps its learned absolute positions beside the places."""
        return self.cfg.position_embedding

    @property
    def has_table(self) -> bool:
        """Whether a table of absolute positions or places bounds the problems the model can address: false for
        places that only score the attention (``place_vectors=false``) without learned positions."""
        return self.cfg.position_embedding or (self.cfg.place_embedding and self.cfg.place_vectors)

    @property
    def trained_len(self) -> int:
        """Positions of the trained layout: with places, its length; else block_size."""
        return len(self.place_ids) if self.cfg.place_embedding else self.block_size

    def places_to(self, end: int, places: torch.Tensor | None) -> torch.Tensor:
        """The place ids of positions 0 .. end - 1, (end,) or (B, end): ``places``, or the trained layout's when
        None (a ValueError for a longer sequence, whose places only the caller knows)."""
        if places is None and end > self.trained_len:
            raise ValueError(f"a sequence of {end} tokens is longer than the trained layout: give its places")
        return (self.place_ids if places is None else places)[..., :end]

    def added(self, start: int, T: int, places: torch.Tensor | None, pos_emb: nn.Embedding | None) -> torch.Tensor:
        """What positions start..start+T-1 add to their tokens' embeddings, (T, d_model) or (B, T, d_model): the
        learned position embedding, the place embedding of their places, or the sum of both."""
        parts = [pos_emb.weight[start : start + T]] if pos_emb is not None else []
        if self.cfg.place_embedding and self.cfg.place_vectors:
            parts.append(self.place_emb(self.places_to(start + T, places)[..., start:]))
        if self.cfg.place_of == "stepped":
            parts.append(self.role_emb(split_roles(self.places_to(start + T, places)[..., start:])[0]))
        if not parts:  # places that only score the attention: nothing added
            return torch.zeros(T, self.d_model, device=self.place_scores.weight.device)
        return sum(parts[1:], parts[0])

    def attention(self, T_q: int, T_k: int, places: torch.Tensor | None, device: torch.device) -> list:
        """Per layer, what the scheme adds to causal attention for queries at positions T_k - T_q .. T_k - 1: a
        :class:`ScoreTerms`, or None where it adds nothing."""
        table = self.place_score_table(T_q, T_k, places)
        scale = query_scale(T_q, T_k, self.cfg.log_scale, device) if self.cfg.log_scale else None
        if table is None and scale is None:
            return [None] * self.n_layers
        return [ScoreTerms(None if table is None else table[i], scale) for i in range(self.n_layers)]

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
        lined = self.cfg.place_of == "lined"
        if lined:  # each id is place + LINE_STRIDE * line (data/positions.py)
            lines, places = places // LINE_STRIDE, places % LINE_STRIDE
        if self.cfg.place_of == "stepped":  # each id is place + ROLE_STRIDE * role: the roles are added vectors
            places = split_roles(places)[1]
        query, key = places[:, T_k - T_q :, None], places[:, None, :]  # (B, T_q, 1), (B, 1, T_k)
        bucket = (query - key).clamp(-K - 1, K + 1) + K + 1  # 0 .. 2K + 2: farther below, -K .. K, farther above
        bucket = bucket.masked_fill((query <= 0) | (key == 0), 2 * K + 3)  # a token with no place (or anchored)
        anchored = self.cfg.place_of in ANCHORED
        if anchored:  # an anchored key (place -p): a score of its own place, from anywhere
            bucket = torch.where(key < 0, 2 * K + 3 + (-key).clamp(max=ANCHORS), bucket)
        hidden = key < -ANCHORS if anchored else None  # anchored places beyond the scored ones
        if lined:  # a query on a line sees, of the keys on lines, its own line's and the line before's only -- and
            # a key on line -j (a sum's operand, data/positions.py) from line j alone
            q_line, k_line = lines[:, T_k - T_q :, None].abs(), lines[:, None, :]
            on_lines, gap = (q_line > 0) & (k_line != 0), q_line - k_line.abs()
            hidden = on_lines & ((gap < 0) | (gap > 1) | ((k_line < 0) & (gap != 0)))
            bucket = bucket + (2 * K + 4) * torch.where(on_lines, 1 + gap.clamp(0, 1), 0)
        table = self.place_scores(bucket)  # (B, T_q, T_k, n_layers * n_heads)
        if self.cfg.place_window:  # hidden: keys more than K places away, and every digit from a token with no place
            far = (key > 0) & ((query <= 0) | ((query - key).abs() > K))  # a query always sees itself
            hidden = far if hidden is None else hidden | far
        if hidden is not None:
            table = table.masked_fill(hidden.unsqueeze(-1), float("-inf"))
        B, L, H = len(places), self.n_layers, self.n_heads
        return table.view(B, T_q, T_k, L, H).permute(3, 0, 4, 1, 2)

    def training_places(self, seq: torch.Tensor, trained: ProblemFormat, fmt: ProblemFormat) -> torch.Tensor | None:
        """A training batch's place ids (B, seq_len), moved at random so every place the model addresses is learned
        (:func:`data.positions.training_places`); None without a place embedding."""
        c = self.cfg
        if not c.place_embedding:
            return None
        return training_places(seq, trained, fmt, c.place_of, c.place_offset, c.random_places)


OLD_KEYS = ("place_emb.weight", "place_scores.weight")  # their names on the Transformer, before PlaceScheme


# ---- for readers of a whole network (the exports, the lab, the circuit graph) -------------------------------
def trained_len(net) -> int:
    """Positions of ``net``'s trained layout (what ``position_table`` covers)."""
    return net.places.trained_len if net.places is not None else net.cfg.block_size


def position_table(net) -> torch.Tensor:
    """What each position of the trained layout adds to its token's embedding, (trained_len, d_model): one
    table, as a fixed layout makes it (the Hugging Face export and TransformerLens fold it in)."""
    return net.positions(0, trained_len(net))


def attention_terms(net, T_q: int, T_k: int, places, device) -> tuple[list, torch.Tensor | None]:
    """``net``'s additions to causal attention as (per layer a score bias or None, the query scale or None)."""
    terms = net.places.attention(T_q, T_k, places, device) if net.places is not None else [None] * net.cfg.n_layers
    return [t and t.bias for t in terms], next((t.scale for t in terms if t is not None), None)
