"""A network from its settings: the flat ``model.*`` keys of configs/model (and of every checkpoint's
``hyper_parameters``) grouped into a :class:`TransformerConfig`, and the :class:`Transformer` with the position scheme
they ask for -- None, the lesson's learned positions, or the length research's places (model/positions.py)."""

from __future__ import annotations

import inspect
from dataclasses import replace

from data.problems import ProblemFormat
from model.own_block import BlockError, OwnBlock, load_block
from model.positions import PLACE_FIELDS, PlaceConfig, PlaceScheme
from model.transformer import Transformer, TransformerConfig


def transformer_config(attention: str | None = None, attention_sha256: str | None = None, **settings):
    """Flat settings (configs/model, a checkpoint's ``model``) -> a TransformerConfig whose ``places`` groups the
    place fields; None when they are the defaults (GPT-2's learned positions, the lesson's own). ``attention``: a
    learner's block, FILE.py:CLASS, loaded and checked here (:func:`own_block`); ``attention_sha256``: the hash its
    file must have (a resumed run's)."""
    grouped = {name: settings.pop(name) for name in PLACE_FIELDS if name in settings}
    places = PlaceConfig(**grouped)
    cfg = TransformerConfig(**settings, places=None if places == PlaceConfig() else places)
    if attention is None:
        return cfg
    try:
        return replace(cfg, attention=own_block(attention, cfg, attention_sha256))
    except BlockError as e:
        raise ValueError(f"attention={attention}: {e}") from None


# its settings by name, for what reads a _target_'s arguments (the config checks, their "did you mean")
transformer_config.__signature__ = inspect.Signature(
    [p for p in inspect.signature(TransformerConfig).parameters.values() if p.name not in ("places", "attention")]
    + list(inspect.signature(PlaceConfig).parameters.values())
    + [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in ("attention", "attention_sha256")],
    return_annotation=TransformerConfig,
)
OWN_BLOCK_KEYS = ("attention", "attention_sha256")  # what a checkpoint's ``model`` records of a learner's block


def own_block(spec: str | type, cfg: TransformerConfig, sha256: str | None = None) -> OwnBlock:
    """A learner's block for ``cfg``: its class loaded (model/own_block.py) -- or the class itself, written in a
    notebook (no file, nothing to hash) --, its file the one hashed ``sha256`` when given, and model/check.py's check
    passed at the calculator's size; BlockError saying what to change."""
    from model.check import check_block

    for setting, value, fix in (
        ("places", cfg.places, "drop the position scheme's settings (model.place_*, position=)"),
        ("n_kv_heads", cfg.n_kv_heads not in (None, cfg.n_heads), "drop model.n_kv_heads"),
        ("dropout", cfg.dropout, "set model.dropout=0.0"),
        ("bias", not cfg.bias, "set model.bias=true"),
    ):
        if value:
            raise BlockError(f"a learner's block runs as the lesson writes it, without model.{setting}: {fix}")
    cls, source, sha = (spec, "", "") if isinstance(spec, type) else load_block(spec)
    if sha256 is not None and sha != sha256:
        raise BlockError(
            f"the file has changed since the run was trained (sha256 {sha[:12]}, the run's {sha256[:12]}); "
            "put back the block the run was trained with, or train a new run"
        )
    report = check_block(cls, cfg.d_model, cfg.n_heads)
    if not report.ok:
        every = "check_block(...)" if cls is spec else f"python -m model.check {spec}"
        raise BlockError(f"{report.first_failure}; {every} shows every check")
    return OwnBlock(cls.__name__ if cls is spec else spec, cls, source, sha, report.mask)


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


def network_for(model: dict, fmt: ProblemFormat, attention: OwnBlock | None = None) -> Transformer:
    """The network a checkpoint's hyper-parameters describe (``model``: a TransformerConfig as a flat dict). A block
    the checkpoint names is never imported from it (a run directory is data): its weights, saved under the lesson's
    names, run in the lesson's block, which the check found equal; ``attention``: the learner's block a training
    run was handed (training/assemble.py) -- that one builds the blocks."""
    cfg = transformer_config(**{k: v for k, v in model.items() if k not in OWN_BLOCK_KEYS})
    return build_transformer(cfg if attention is None else replace(cfg, attention=attention), fmt)
