"""A network from its settings: the flat ``model.*`` keys of configs/model (and of every checkpoint's
``hyper_parameters``) grouped into a :class:`TransformerConfig`, and the :class:`Transformer` with the position scheme
they ask for -- None, the lesson's learned positions, or the length research's places (model/positions.py)."""

from __future__ import annotations

import inspect

from data.problems import ProblemFormat
from model.positions import PLACE_FIELDS, PlaceConfig, PlaceScheme
from model.transformer import Transformer, TransformerConfig


def transformer_config(**settings) -> TransformerConfig:
    """Flat settings (configs/model, a checkpoint's ``model``) -> a TransformerConfig whose ``places`` groups the
    place fields; None when they are the defaults (GPT-2's learned positions, the lesson's own)."""
    grouped = {name: settings.pop(name) for name in PLACE_FIELDS if name in settings}
    places = PlaceConfig(**grouped)
    return TransformerConfig(**settings, places=None if places == PlaceConfig() else places)


# its settings by name, for what reads a _target_'s arguments (the config checks, their "did you mean")
transformer_config.__signature__ = inspect.Signature(
    [p for p in inspect.signature(TransformerConfig).parameters.values() if p.name != "places"]
    + list(inspect.signature(PlaceConfig).parameters.values()),
    return_annotation=TransformerConfig,
)


# A position scheme's config class -> its module, built as ``Scheme(cfg.places, cfg, fmt)``. The module is what the
# Transformer calls (model/transformer.py): ``positions`` (keep the learned positions beside it?), ``has_table``
# (does block_size bound it?), ``added(start, T, places, pos_emb)`` (what positions add to the tokens),
# ``attention(T_q, T_k, places, device)`` (per layer a scores term or None), ``after_init()``, ``rename_old_keys``
# (a load_state_dict pre-hook), and what training asks: ``training_places(seq, trained, fmt)``.
SCHEMES: dict[type, type] = {PlaceConfig: PlaceScheme}


def build_transformer(cfg: TransformerConfig, fmt: ProblemFormat) -> Transformer:
    """The network ``cfg`` describes for problems of ``fmt`` (whose layout gives each position its place), new
    weights: with the position scheme ``cfg.places`` asks for (SCHEMES), or the lesson's learned positions."""
    if cfg.places is None:
        return Transformer(cfg)
    return Transformer(cfg, SCHEMES[type(cfg.places)](cfg.places, cfg, fmt))


def network_for(model: dict, fmt: ProblemFormat) -> Transformer:
    """The network a checkpoint's hyper-parameters describe (``model``: a TransformerConfig as a flat dict)."""
    return build_transformer(transformer_config(**model), fmt)
