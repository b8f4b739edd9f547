"""Pooling of token states into one vector per text, the same at every layer, and how it is chosen.

:func:`pool` applies a pooling mode. :func:`resolve_pooling` decides the mode of a plain
transformers model (one without a SentenceTransformer pipeline): an explicit override table, then
the model's own sentence-transformers pooling config when one exists, then the architecture default
(last token for decoders, mean for encoders).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = [
    "LAST_TOKEN_RULES",
    "POOLINGS",
    "REFERENCE_POOLING_OVERRIDES",
    "pool",
    "resolve_pooling",
    "st_config_pooling",
]

POOLINGS: tuple[str, ...] = ("mean", "cls", "last")
LAST_TOKEN_RULES: tuple[str, ...] = ("true", "reference")
"""``true``: the last real token (correct for either padding side). ``reference``: position
``mask.sum(1) - 1``, the authors' rule, which on left-padded batches lands on a pad or mid-text
token for every text shorter than the longest of its batch."""

REFERENCE_POOLING_OVERRIDES: Mapping[str, str] = {
    # The pooling the authors' release forces for these Hub ids (their models were trained with it;
    # GritLM is a decoder they pool with mean). Offered as ``pooling_overrides="reference"``.
    "BAAI/bge-base-en-v1.5": "cls",
    "BAAI/bge-large-en-v1.5": "cls",
    "BAAI/bge-small-en-v1.5": "cls",
    "BAAI/bge-m3": "cls",
    "thenlper/gte-base": "cls",
    "thenlper/gte-large": "cls",
    "thenlper/gte-small": "cls",
    "Alibaba-NLP/gte-base-en-v1.5": "cls",
    "Alibaba-NLP/gte-large-en-v1.5": "cls",
    "Snowflake/snowflake-arctic-embed-l": "cls",
    "Snowflake/snowflake-arctic-embed-m": "cls",
    "Snowflake/snowflake-arctic-embed-s": "cls",
    "Snowflake/snowflake-arctic-embed-xs": "cls",
    "Snowflake/snowflake-arctic-embed-m-v2.0": "cls",
    "Snowflake/snowflake-arctic-embed-l-v2.0": "cls",
    "mixedbread-ai/mxbai-embed-large-v1": "cls",
    "GritLM/GritLM-7B": "mean",
}

# sentence-transformers Pooling modes → ours (``max``, ``mean_sqrt_len_tokens`` and
# ``weightedmean`` have no per-layer equivalent here).
_ST_MODES = {"cls": "cls", "mean": "mean", "lasttoken": "last"}
_ST_LEGACY_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "lasttoken",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
}


def pool(
    hidden: torch.Tensor, attention_mask: torch.Tensor, mode: str, last_token: str = "true"
) -> torch.Tensor:
    """Pool ``(B, T, H)`` token states into ``(B, H)`` fp32 vectors.

    Args:
        hidden: token states of one layer.
        attention_mask: ``(B, T)``, 1 for real tokens.
        mode: ``"mean"`` (mask-weighted), ``"cls"`` (the first real token, for left and right
            padding) or ``"last"``.
        last_token: for ``"last"``: ``"true"`` (the last real token, for left and right padding)
            or ``"reference"`` (position ``mask.sum(1) - 1`` as the authors' code takes it: right
            only for unpadded or right-padded rows).

    Raises:
        ValueError: for an unknown mode or last-token rule.
    """
    if last_token not in LAST_TOKEN_RULES:
        raise ValueError(f"last_token must be one of {LAST_TOKEN_RULES}; got {last_token!r}")
    hidden = hidden.float()
    mask = attention_mask.to(hidden.device)
    if mode == "mean":
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    if mode == "cls":  # the first real token: position 0 when right-padded, later when left-padded
        first = mask.bool().int().argmax(dim=1)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), first]
    if mode == "last":
        if last_token == "reference":
            last = (mask.sum(dim=1) - 1).clamp(min=0)
        else:
            # Position of the last 1 in each mask row: works whatever side the padding is on.
            positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
            last = (
                torch.where(mask.bool(), positions, torch.full_like(positions, -1))
                .max(dim=1)
                .values.clamp(min=0)
            )
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    raise ValueError(f"pooling must be one of {POOLINGS}; got {mode!r}")


def st_config_pooling(config: Mapping[str, Any]) -> str | None:
    """Our pooling mode for a sentence-transformers ``Pooling`` config (``1_Pooling/config.json``).

    Reads the ``pooling_mode`` key (sentence-transformers 5+) or the legacy ``pooling_mode_*``
    booleans. Returns ``None`` when the config names no mode, several modes, or one we cannot
    pool per layer (``max``, ``mean_sqrt_len_tokens``, ``weightedmean``).
    """
    mode = config.get("pooling_mode")
    if mode is None:
        active = [name for key, name in _ST_LEGACY_KEYS.items() if config.get(key)]
        mode = active[0] if len(active) == 1 else None
    if isinstance(mode, (list, tuple)):
        mode = mode[0] if len(mode) == 1 else None
    return _ST_MODES.get(mode) if isinstance(mode, str) else None


def _override_for(name: str, overrides: Mapping[str, str]) -> str | None:
    wanted = name.rstrip("/").lower()
    for key, value in overrides.items():
        key_lower = key.lower()
        # The Hub id itself, or a local folder named like the model (".../bge-base-en-v1.5").
        if wanted == key_lower or wanted.endswith("/" + key_lower.rsplit("/", 1)[-1]):
            return value
    return None


def resolve_pooling(
    name: str,
    causal: bool,
    st_config: Mapping[str, Any] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """The pooling mode of a plain transformers model and where it came from.

    Order: ``overrides`` (matched on the Hub id, case-insensitive, or on a folder named like the
    model), the model's sentence-transformers ``Pooling`` config, the architecture default (last
    token for decoders, mean otherwise).

    Args:
        name: the model's Hub id or folder.
        causal: whether the model is a decoder.
        st_config: the model's ``Pooling`` config, when it has one.
        overrides: ``{model id: mode}``, e.g. :data:`REFERENCE_POOLING_OVERRIDES`.

    Returns:
        ``(mode, source)`` with source ``"override"``, ``"sentence-transformers config"`` or
        ``"architecture default"``.

    Raises:
        ValueError: for an override naming an unknown mode.
    """
    if overrides:
        forced = _override_for(name, overrides)
        if forced is not None:
            if forced not in POOLINGS:
                raise ValueError(f"pooling override for {name!r} must be one of {POOLINGS}; got {forced!r}")
            return forced, "override"
    if st_config is not None:
        mode = st_config_pooling(st_config)
        if mode is not None:
            return mode, "sentence-transformers config"
    return ("last" if causal else "mean"), "architecture default"
