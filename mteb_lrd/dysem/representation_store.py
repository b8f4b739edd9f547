"""A content-addressed store of vectors on disk: one ``.npz`` shard per write, written atomically.

Keys are caller-made hashes (e.g. of model identity, component and text). A shard is written to a
temporary file and renamed into place, so an interrupted run leaves either a whole shard or none;
a shard that cannot be read is reported, removed and recomputed, never used.
"""

from __future__ import annotations

import hashlib
import io
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mteb_lrd.io import atomic_write_bytes, path_error

__all__ = ["RepresentationStore", "text_key"]


def text_key(*parts: str) -> str:
    """A hex SHA-256 of ``parts`` (separated so that ``("ab", "c")`` and ``("a", "bc")`` differ)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


class RepresentationStore:
    """Vectors of one width, keyed by strings, persisted as shards under ``root``.

    Args:
        root: folder of the shards (created on first write).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._vectors: dict[str, np.ndarray] | None = None

    def _load(self) -> dict[str, np.ndarray]:
        if self._vectors is None:
            self._vectors = {}
            for shard in sorted(self.root.glob("shard-*.npz")):
                try:
                    with np.load(shard, allow_pickle=False) as data:
                        keys, values = data["keys"], data["values"]
                        if values.ndim != 2 or len(keys) != len(values):
                            raise ValueError(f"keys {keys.shape} and values {values.shape} do not match")
                except OSError as exc:  # the file system, not the shard: keep it, say which
                    raise path_error(
                        exc,
                        f"cannot read cache shard {shard} ({exc.strerror or exc}): fix its permissions "
                        "or choose another cache folder (the shard was left as it is)",
                    ) from exc
                except Exception as exc:  # noqa: BLE001 - any corrupt shard is treated the same way
                    warnings.warn(f"ignoring and removing corrupt cache shard {shard}: {exc}", stacklevel=2)
                    shard.unlink(missing_ok=True)
                    continue
                self._vectors.update(zip(keys.tolist(), values, strict=True))
        return self._vectors

    def __len__(self) -> int:
        return len(self._load())

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors among ``keys`` (missing keys are simply absent)."""
        vectors = self._load()
        return {key: vectors[key] for key in keys if key in vectors}

    def put(self, keys: Sequence[str], values: np.ndarray) -> None:
        """Store ``values[i]`` under ``keys[i]`` in a new shard (atomic: temp file + rename)."""
        values = np.asarray(values, dtype=np.float32)
        if values.ndim != 2 or values.shape[0] != len(keys):
            raise ValueError(f"need one row per key: {len(keys)} keys, values of shape {values.shape}")
        if not keys:
            return
        name = f"shard-{text_key(*keys)[:24]}.npz"
        buffer = io.BytesIO()
        np.savez(buffer, keys=np.asarray(keys, dtype=str), values=values)
        atomic_write_bytes(self.root / name, buffer.getvalue())
        self._load().update(zip(keys, values, strict=True))
