"""Atomic, content-addressed on-disk cache for arrays.

Every entry is one ``.npz`` file written atomically (:func:`mteb_lrd.io.atomic_write_bytes`, so
with the umask's permissions), with a SHA-256 digest stored beside the arrays. The digest covers
the arrays **and the entry's key and row count**, so a file copied or renamed under another key,
or holding another number of rows than the caller expects, is detected like a torn one.

An entry whose *content* is wrong (not a zip, torn, digest mismatch, another key, stale format) is
reported, removed and treated as missing: never silently used, and recomputed by the caller. An
entry that cannot be *read* (no permission, a folder where the file should be, an I/O error) is a
problem of the file system, not of the entry: it is left untouched and the ``OSError`` says which
path and what to do.
"""

from __future__ import annotations

import errno
import hashlib
import io
import logging
import os
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from mteb_lrd.io import atomic_write_bytes, path_error

__all__ = ["ArrayCache", "CacheEntryError"]

logger = logging.getLogger(__name__)

_DIGEST = "__sha256__"
_ROWS = "__rows__"
_FORMAT_KEY = "__format__"
_FORMAT = 2  # 2: the digest covers key and row count
_RESERVED = (_DIGEST, _ROWS, _FORMAT_KEY)


class CacheEntryError(ValueError):
    """A cache entry's content is not what its name promises (reported, removed, recomputed)."""


def _digest(key: str, rows: int, arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256(f"mteb-lrd-cache|{_FORMAT}|{key}|{rows}|".encode())
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
        self.root = Path(root).expanduser()

    def path(self, key: str) -> Path:
        """Where the entry ``key`` lives (two-level fan-out keeps folders small)."""
        if not key or any(c in key for c in "/\\.") or key != key.strip():
            raise ValueError(f"cache keys must be plain non-empty names; got {key!r}")
        return self.root / key[:2] / f"{key}.npz"

    def load(self, key: str, *, rows: int | None = None) -> dict[str, np.ndarray] | None:
        """The arrays stored under ``key``, or ``None`` when missing or corrupt (corrupt files are removed).

        Args:
            key: the entry's key.
            rows: the row count the caller expects (as given to :meth:`save`); an entry with another
                count is stale and treated as corrupt. ``None``: not checked.

        Raises:
            OSError: when the entry exists but cannot be read (permissions, a folder in its place,
                an I/O error); the message names the path, and the entry is left as it is.
        """
        path = self.path(key)
        if not path.exists():
            return None
        if not path.is_file():
            raise IsADirectoryError(
                errno.EISDIR,
                f"cache entry {path} is a folder, not a file: remove it or choose another cache folder",
            )
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
            return self._verify(key, rows, arrays)
        except OSError as err:
            raise path_error(
                err,
                f"cannot read cache entry {path} ({err.strerror or err}): fix its permissions or "
                "choose another cache folder (the entry was left as it is)",
            ) from err
        except (CacheEntryError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as err:
            logger.warning("cache entry %s is corrupt (%s); it is removed and will be recomputed", path, err)
            try:
                path.unlink(missing_ok=True)
            except OSError as unlink_error:
                logger.warning("could not remove %s (%s)", path, unlink_error)
            return None

    @staticmethod
    def _verify(key: str, rows: int | None, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if _FORMAT_KEY not in arrays or int(arrays.pop(_FORMAT_KEY)) != _FORMAT:
            raise CacheEntryError("written by another mteb-lrd version")
        stored_rows = int(arrays.pop(_ROWS))
        if str(arrays.pop(_DIGEST)) != _digest(key, stored_rows, arrays):
            raise CacheEntryError(
                f"digest mismatch: the file was modified, or copied from another key than {key}"
            )
        if rows is not None and rows != stored_rows:
            raise CacheEntryError(f"holds {stored_rows} rows, expected {rows}")
        return arrays

    def save(self, key: str, arrays: Mapping[str, np.ndarray], *, rows: int | None = None) -> Path:
        """Store ``arrays`` under ``key`` atomically; returns the file path.

        Args:
            key: the entry's key (bound into the digest).
            arrays: the arrays (names must not start and end with ``__``: reserved).
            rows: the row count to record and bind (checked by ``load(key, rows=...)``); default:
                the first dimension of the first array (0 when there is none).

        Raises:
            OSError: when the entry cannot be written; the message names the path.
        """
        reserved = [name for name in arrays if name in _RESERVED]
        if reserved:
            raise ValueError(f"{reserved[0]!r} is reserved")
        arrays = {name: np.asarray(value) for name, value in arrays.items()}
        if rows is None:
            first = next(iter(arrays.values()), None)
            rows = int(first.shape[0]) if first is not None and first.ndim else 0
        meta: dict[str, np.ndarray] = {
            _DIGEST: np.array(_digest(key, rows, arrays)),
            _ROWS: np.array(rows, dtype=np.int64),
            _FORMAT_KEY: np.array(_FORMAT, dtype=np.int64),
        }
        buffer = io.BytesIO()
        np.savez(buffer, **{**arrays, **meta})  # type: ignore[arg-type]
        return atomic_write_bytes(self.path(key), buffer.getvalue())
