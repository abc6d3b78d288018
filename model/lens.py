"""Load a trained calculator into TransformerLens: ``transformer_lens_model(ckpt)``.

TransformerLens 4 replaced ``HookedTransformer`` and ``HookedTransformerConfig`` by ``TransformerBridge``
and ``TransformerBridgeConfig`` (importing the old names raises an ImportError that says so). A bridge
keeps the hook names of HookedTransformer -- ``hook_embed``, ``blocks.{L}.hook_resid_pre``,
``blocks.{L}.attn.hook_q/k/v``, ``blocks.{L}.attn.hook_pattern`` (batch, head, query, key),
``blocks.{L}.attn.hook_z`` (batch, pos, head, d_head), ``blocks.{L}.hook_attn_out``,
``blocks.{L}.mlp.hook_post``, ... -- and ``run_with_cache``, ``run_with_hooks``, ``hooks()``.

``TransformerBridge.boot_native(config)`` builds TransformerLens' own pre-LN transformer (learned
positions, LayerNorm, exact GELU, grouped-query attention when asked) from our dimensions; our weights
are then loaded into it unchanged. No weight processing is applied: LayerNorm is not folded and neither
the writing weights nor the unembedding are centred, so the logits equal ours (centring the unembedding
would shift every position's logits by a constant). Call ``model.enable_compatibility_mode()`` yourself
for HookedTransformer's processed coordinates (fold_ln, centring), e.g. for direct logit attribution.
"""

from __future__ import annotations

from pathlib import Path

import torch

from model.calculator import Calculator
from model.optional import require
from model.positions import position_table, trained_len


def bridge_config(calc: Calculator):
    """Our :class:`TransformerConfig` as a ``TransformerBridgeConfig`` for ``boot_native``."""
    from transformer_lens.config import TransformerBridgeConfig

    cfg = calc.net.cfg
    return TransformerBridgeConfig(
        d_model=cfg.d_model,
        d_head=cfg.head_dim,
        n_heads=cfg.n_heads,
        n_key_value_heads=cfg.n_kv_heads if (cfg.n_kv_heads or cfg.n_heads) != cfg.n_heads else None,
        n_layers=cfg.n_layers,
        n_ctx=trained_len(calc.net),  # the trained layout (place models fold their places into it)
        d_mlp=cfg.mlp_ratio * cfg.d_model,
        d_vocab=cfg.vocab_size,
        act_fn="gelu",  # exact GELU, as F.gelu
        normalization_type="LN",
        eps=calc.net.ln_f.eps,
        positional_embedding_type="standard",
    )


def bridge_state_dict(net) -> dict[str, torch.Tensor]:
    """Our parameters under the native bridge's names. Its layers are ``nn.Linear`` too, with heads laid out
    head-major like ours, so no tensor is reshaped; a missing bias (bias=False) becomes an exact zero."""

    def linear(lin, prefix: str) -> dict[str, torch.Tensor]:
        weight = lin.weight.detach().clone()
        bias = torch.zeros(weight.shape[0]) if lin.bias is None else lin.bias.detach().clone()
        return {f"{prefix}.weight": weight, f"{prefix}.bias": bias}

    sd = {
        "embed.weight": net.tok_emb.weight.detach().clone(),
        "pos_embed.weight": position_table(net).detach().clone(),  # with the place embedding folded in
        "unembed.weight": net.lm_head.weight.detach().clone(),
        "unembed.bias": torch.zeros(net.lm_head.weight.shape[0]),
    }  # our LM head has no bias
    for i, block in enumerate(net.blocks):
        parts = {
            "ln1": block.ln_attn,
            "attn.q": block.attn.W_q,
            "attn.k": block.attn.W_k,
            "attn.v": block.attn.W_v,
            "attn.o": block.attn.W_o,
            "ln2": block.ln_mlp,
            "mlp.in": block.mlp.fc_in,
            "mlp.out": block.mlp.fc_out,
        }
        for name, module in parts.items():
            sd |= linear(module, f"blocks.{i}.{name}")
    sd |= linear(net.ln_f, "ln_final")
    return sd


def transformer_lens_model(source: str | Path | Calculator):
    """A checkpoint file, run directory or :class:`Calculator` -> a TransformerLens ``TransformerBridge`` in eval
    mode holding our weights, with our tokenizer (``model.to_tokens("123+045=")`` starts with [BOS]).

    Raises ``MissingExtraError`` (one line) without the interop extra, ``CheckpointError`` for a bad checkpoint,
    ``ValueError`` for a model whose attention TransformerLens cannot express (place_bias, log_scale).
    """
    require("TransformerLens", "transformer_lens", "transformers")
    import transformer_lens.model_bridge.sources.native  # noqa: F401  -- attaches TransformerBridge.boot_native
    from transformer_lens.model_bridge import TransformerBridge

    from model.export import hf_tokenizer

    if not isinstance(source, Calculator):
        from model.checkpoint import load_calculator

        source = load_calculator(source)
    scheme = source.net.cfg.places
    if scheme is not None and (scheme.place_bias or scheme.log_scale):
        raise ValueError("TransformerLens has no attention term for place scores (place_bias) or log_scale")
    model = TransformerBridge.boot_native(bridge_config(source))
    model.load_state_dict(bridge_state_dict(source.net), strict=True)
    # boot_native loads no tokenizer, so none is probed: set what the probe would find (see boot_transformers):
    # the tokenizer writes [BOS] itself (so to_tokens adds none) and no [EOS].
    model.tokenizer = hf_tokenizer(source)
    model.cfg.tokenizer_prepends_bos, model.cfg.tokenizer_appends_eos = True, False
    return model.eval()
