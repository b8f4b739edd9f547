"""A digest of a loaded model for cache keys: it changes when the weights, config or pipeline change."""

from __future__ import annotations

import hashlib

from mteb_lrd.extraction.loading import LoadedModel

__all__ = ["model_identity"]


def model_identity(loaded: LoadedModel) -> str:
    """A cache key part that changes when the weights, config or pipeline change (cheap: samples weights)."""
    hf = loaded.architecture.model
    h = hashlib.sha256()
    h.update(type(hf).__name__.encode())
    h.update(loaded.name.encode())
    h.update(hf.config.to_json_string(use_diff=False).encode())
    if loaded.is_sentence_transformer:
        h.update(repr(loaded.model).encode())
    params = list(hf.parameters())
    h.update(str(sum(p.numel() for p in params)).encode())
    for p in (params[0], params[len(params) // 2], params[-1]):
        h.update(p.detach().flatten()[:4096].float().cpu().numpy().tobytes())
    return h.hexdigest()
