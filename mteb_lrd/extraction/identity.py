"""A digest of a loaded model for cache keys: it changes when any weight, the config, the tokenizer
or the pipeline change.

Cached vectors are only as trustworthy as the key they are stored under, so the identity covers
**every byte of every parameter and buffer** (with its name, dtype and shape), not a sample, and
everything about the tokenizer that decides its ids: a model edited in place (one weight of any
layer) or given another tokenizer gets a new identity and its stale vectors are never reused (an
extractor digests the model again whenever :func:`state_fingerprint` sees a change). SHA-256 runs at
memory speed on current CPUs (hardware SHA extensions; ``hashlib`` releases the GIL, so tensors are
hashed on a few threads): 0.15–0.35 s for all-MiniLM-L6-v2 (22.7 M parameters, 91 MB) on two busy
cores, no more than one raw SHA-256 of its bytes; a 7 B float16 model takes seconds, once per
extractor and model state — small next to one forward pass over a task.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from mteb_lrd.extraction.loading import LoadedModel

__all__ = ["model_identity", "state_fingerprint", "tokenizer_digest", "weights_digest"]

_THREADS = max(1, min(8, os.cpu_count() or 1))


def _tensors(module: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Every parameter and buffer once (tied weights, shared by several names, hashed once)."""
    seen: set[tuple[int, torch.dtype, tuple[int, ...], tuple[int, ...]]] = set()
    named = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
    for name, tensor in named:
        if tensor.device.type != "meta":
            ident = (tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()))
            if ident in seen:
                continue
            seen.add(ident)
        yield name, tensor


def _tensor_digest(name: str, tensor: torch.Tensor) -> bytes:
    h = hashlib.sha256()
    h.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
    if tensor.device.type == "meta":  # no data to hash (not materialised)
        h.update(b"meta")
        return h.digest()
    with torch.no_grad():
        flat = tensor.detach().reshape(-1).contiguous().cpu()
        if flat.numel():
            h.update(flat.view(torch.uint8).numpy().data)
    return h.digest()


def weights_digest(module: torch.nn.Module) -> str:
    """SHA-256 over the name, dtype, shape and bytes of every parameter and buffer of ``module``.

    Args:
        module: any torch module (a SentenceTransformer, a transformers model, ...).

    Returns:
        A hex digest that changes when any element of any tensor changes, or a tensor is added,
        removed, renamed, re-shaped or cast.
    """
    tensors = list(_tensors(module))
    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        parts = list(pool.map(lambda item: _tensor_digest(*item), tensors))
    h = hashlib.sha256(str(len(parts)).encode())
    for part in parts:
        h.update(part)
    return h.hexdigest()


def _tokenizer(loaded: LoadedModel) -> Any:
    """The tokenizer that turns texts into the model's ids (a SentenceTransformer's own)."""
    return getattr(loaded.model, "tokenizer", None) if loaded.is_sentence_transformer else loaded.tokenizer


def _tokenizer_settings(tokenizer: Any) -> str:
    """What a tokenizer object adds to its vocabulary: size, special tokens, sides, BOS / EOS flags."""
    if tokenizer is None:
        return "none"
    special = sorted(
        (str(k), str(v)) for k, v in (getattr(tokenizer, "special_tokens_map", None) or {}).items()
    )
    return repr((type(tokenizer).__name__, len(tokenizer), special, getattr(tokenizer, "padding_side", None),
                 getattr(tokenizer, "truncation_side", None), getattr(tokenizer, "add_bos_token", None),
                 getattr(tokenizer, "add_eos_token", None)))  # fmt: skip


def tokenizer_digest(tokenizer: Any) -> str:
    """SHA-256 of what decides the ids a tokenizer gives: a fast tokenizer's whole serialisation
    (vocabulary, merges, normaliser, pre-tokeniser, post-processor, added tokens; not the padding and
    truncation state a call leaves behind), else its vocabulary, and its settings."""
    h = hashlib.sha256(_tokenizer_settings(tokenizer).encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        serialised = json.loads(backend.to_str())
        serialised.pop("padding", None)
        serialised.pop("truncation", None)
        h.update(json.dumps(serialised, sort_keys=True, ensure_ascii=False).encode())
    elif tokenizer is not None:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False).encode())
    return h.hexdigest()


def state_fingerprint(loaded: LoadedModel) -> tuple[Any, ...]:
    """A cheap stand-in for :func:`model_identity`: it changes when the identity may have, so the
    identity is computed again only then. It reads every tensor's address, shape, dtype and torch's
    version counter (bumped by every in-place operation on it; a write through ``.data`` bypasses
    the counter and goes unseen), the config and the tokenizer's settings."""
    hf: Any = loaded.architecture.model
    module = loaded.model if loaded.is_sentence_transformer else hf
    tensors = tuple((name, t.data_ptr(), t._version, tuple(t.shape), t.dtype) for name, t in _tensors(module))
    return tensors, hf.config.to_json_string(use_diff=False), _tokenizer_settings(_tokenizer(loaded))


def model_identity(loaded: LoadedModel) -> str:
    """A cache key part that changes when any weight, the config, the tokenizer or the pipeline change.

    Covers the model class, its name, the full config, the SentenceTransformer pipeline (modules and
    their settings), :func:`tokenizer_digest` and :func:`weights_digest` of everything that runs:
    the SentenceTransformer with all its modules (a Dense head too), or the transformers model.
    """
    hf: Any = loaded.architecture.model
    h = hashlib.sha256()
    h.update(type(hf).__name__.encode())
    h.update(loaded.name.encode())
    h.update(hf.config.to_json_string(use_diff=False).encode())
    if loaded.is_sentence_transformer:
        h.update(repr(loaded.model).encode())
    h.update(tokenizer_digest(_tokenizer(loaded)).encode())
    h.update(weights_digest(loaded.model if loaded.is_sentence_transformer else hf).encode())
    return h.hexdigest()
