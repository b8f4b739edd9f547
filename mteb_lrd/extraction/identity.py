"""A digest of a loaded model for cache keys: it changes when any weight, the config or the pipeline change.

Cached vectors are only as trustworthy as the key they are stored under, so the identity covers
**every byte of every parameter and buffer** (with its name, dtype and shape), not a sample: a
model edited in place (one weight of any layer) gets a new identity and its stale vectors are never
reused. SHA-256 runs at memory speed on current CPUs (hardware SHA extensions; ``hashlib`` releases
the GIL, so tensors are hashed on a few threads): 0.15–0.35 s for all-MiniLM-L6-v2 (22.7 M
parameters, 91 MB) on two busy cores, no more than one raw SHA-256 of its bytes; a 7 B float16
model takes seconds, once per extractor — small next to one forward pass over a task.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from mteb_lrd.extraction.loading import LoadedModel

__all__ = ["model_identity", "weights_digest"]

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


def model_identity(loaded: LoadedModel) -> str:
    """A cache key part that changes when any weight, the config or the pipeline change.

    Covers the model class, its name, the full config, the SentenceTransformer pipeline (modules and
    their settings) and :func:`weights_digest` of everything that runs: the SentenceTransformer with
    all its modules (a Dense head too), or the transformers model.
    """
    hf: Any = loaded.architecture.model
    h = hashlib.sha256()
    h.update(type(hf).__name__.encode())
    h.update(loaded.name.encode())
    h.update(hf.config.to_json_string(use_diff=False).encode())
    if loaded.is_sentence_transformer:
        h.update(repr(loaded.model).encode())
    h.update(weights_digest(loaded.model if loaded.is_sentence_transformer else hf).encode())
    return h.hexdigest()
