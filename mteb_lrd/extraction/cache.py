"""Atomic, content-addressed on-disk cache for arrays.

Every entry is one ``.npz`` file written to a temporary name and renamed into place, with a
SHA-256 digest of its arrays stored beside them. A file that fails to load or whose digest does
not match is reported, removed and treated as missing: never silently used.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from mteb_lrd.io import atomic_write_bytes

__all__ = ["ArrayCache"]

logger = logging.getLogger(__name__)

_DIGEST = "__sha256__"


def _digest(arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        h.update(name.encode())
        h.update(str(array.dtype).encode())
        h.update(repr(array.shape).encode())
        h.update(array.tobytes())
    return h.hexdigest()


class ArrayCache:
    """A folder of named groups of arrays, each stored atomically with an integrity digest.

    Args:
        root: the cache folder (created on first write).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        """Where the entry ``key`` lives (two-level fan-out keeps folders small)."""
        if not key or any(c in key for c in "/\\.") or key != key.strip():
            raise ValueError(f"cache keys must be plain non-empty names; got {key!r}")
        return self.root / key[:2] / f"{key}.npz"

    def load(self, key: str) -> dict[str, np.ndarray] | None:
        """The arrays stored under ``key``, or ``None`` when missing or corrupt (corrupt files are removed)."""
        path = self.path(key)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
            stored = str(arrays.pop(_DIGEST))
            if stored != _digest(arrays):
                raise ValueError("digest mismatch")
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
            logger.warning("cache entry %s is corrupt (%s); it will be recomputed", path, err)
            path.unlink(missing_ok=True)
            return None
        return arrays

    def save(self, key: str, arrays: Mapping[str, np.ndarray]) -> Path:
        """Store ``arrays`` under ``key`` atomically; returns the file path."""
        if _DIGEST in arrays:
            raise ValueError(f"{_DIGEST!r} is reserved")
        arrays = {name: np.asarray(value) for name, value in arrays.items()}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays, **{_DIGEST: np.array(_digest(arrays))})
        path = self.path(key)
        atomic_write_bytes(path, buffer.getvalue())
        return path
