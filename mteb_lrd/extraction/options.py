"""How :class:`~mteb_lrd.extraction.extractor.LayerExtractor` reads the layers: one frozen, validated
options object, the keywords of the extractor one to one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from mteb_lrd.extraction.final_norm import FINAL_NORMS
from mteb_lrd.extraction.loading import resolve_dtype
from mteb_lrd.extraction.pooling import LAST_TOKEN_RULES, POOLINGS, REFERENCE_POOLING_OVERRIDES
from mteb_lrd.extraction.templates import resolve_template

__all__ = ["SCORING_DEFAULTS", "ExtractionOptions", "scoring_settings"]


@dataclass(frozen=True)
class ExtractionOptions:
    """The extraction options of :class:`~mteb_lrd.extraction.extractor.LayerExtractor`.

    Attributes:
        pooling: ``"auto"`` or one of ``"mean"``, ``"cls"``, ``"last"`` (plain models only).
        pooling_overrides: ``None``, ``"reference"`` or a ``{model id: mode}`` mapping (stored
            resolved: ``"reference"`` becomes the authors' table).
        last_token: ``"true"`` or ``"reference"`` (decoders pooled at the last token).
        final_norm: ``"as_is"``, ``"all"`` or ``"none"`` (decoders).
        batch_size: texts per forward pass.
        dtype: compute dtype (``None`` keeps the model's).
        max_length: truncation length in tokens.
        show_progress_bar: a tqdm bar over batches.
        cache_dir: folder of the resumable on-disk cache (``None``: no cache).
        shard_size: texts per cache shard.
        template: a template name or a text with one ``{text}`` (``None``: texts as given).

    Raises:
        ValueError: for an invalid value (the message names the field).
    """

    pooling: str = "auto"
    pooling_overrides: Mapping[str, str] | None = None
    last_token: str = "true"
    final_norm: str = "as_is"
    batch_size: int = 32
    dtype: str | torch.dtype | None = None
    max_length: int = 512
    show_progress_bar: bool = True
    cache_dir: str | None = None
    shard_size: int = 1024
    template: str | None = None

    def __post_init__(self) -> None:
        if self.pooling != "auto" and self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be 'auto' or one of {POOLINGS}; got {self.pooling!r}")
        if self.last_token not in LAST_TOKEN_RULES:
            raise ValueError(f"last_token must be one of {LAST_TOKEN_RULES}; got {self.last_token!r}")
        if self.final_norm not in FINAL_NORMS:
            raise ValueError(f"final_norm must be one of {FINAL_NORMS}; got {self.final_norm!r}")
        if isinstance(self.pooling_overrides, str):
            if self.pooling_overrides != "reference":
                raise ValueError(
                    f"pooling_overrides must be None, 'reference' or a mapping; got {self.pooling_overrides!r}"
                )
            object.__setattr__(self, "pooling_overrides", REFERENCE_POOLING_OVERRIDES)
        for name in ("batch_size", "max_length", "shard_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        resolve_dtype(self.dtype)
        resolve_template(self.template)  # a bad template fails here, before any model loads


SCORING_DEFAULTS: dict[str, object] = {
    name: getattr(ExtractionOptions, name)
    for name in ("dtype", "pooling", "pooling_overrides", "last_token", "max_length")
}
"""The extraction settings, with their defaults, that change the embeddings a model is scored on
(``final_norm`` touches the layer states only; ``template`` is labelled on its own)."""


def scoring_settings(values: Mapping[str, object]) -> dict[str, str]:
    """The settings of ``values`` (extraction options as a mapping) that change the scored embeddings
    and differ from their defaults, as short file-name-safe strings: what keeps a run under them
    apart from the model's plain results (an mteb experiment)."""
    found: dict[str, str] = {}
    for key, default in SCORING_DEFAULTS.items():
        value = values.get(key, default)
        if value is None or value == default:
            continue
        if key == "pooling_overrides":
            text = json.dumps(dict(value), sort_keys=True) if isinstance(value, Mapping) else str(value)
            found[key] = hashlib.sha256(text.encode()).hexdigest()[:8]
        else:
            found[key] = str(value).removeprefix("torch.")
    return found
